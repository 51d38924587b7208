//! The TCP rendezvous between real processes (issue 11), on loopback: the test binary
//! starts copies of itself (`current_exe`, the test's name as filter) with
//! `QCD_SOLVE_RZV_CHILD=rank:size:master` telling a copy to act as that rank; the copy
//! prints `RECEIVED <hex>` (or `ERROR <message>`) on stdout and exits 0 (or 1). CPU only.

use qcd_solve::comms::rendezvous::{Rendezvous, RendezvousRoot};
use qcd_solve::Error;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_VAR: &str = "QCD_SOLVE_RZV_CHILD";

/// Held by each test of this binary while it binds or probes loopback ports: the
/// unreachable-master test frees a port it bound and expects nobody to listen there, and a
/// parallel test's `RendezvousRoot::bind("127.0.0.1:0")` could be given that very port
/// (CI at 23:31 UTC, 2026-11-24: the probe connected in 206 us and "gave up early").
static PORTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ports() -> std::sync::MutexGuard<'static, ()> {
    PORTS.lock().unwrap_or_else(|e| e.into_inner())
}
const TIMEOUT: Duration = Duration::from_secs(30);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// NCCL's id is 128 bytes; these cover 0, 0x80 and 0xff.
fn id_bytes() -> Vec<u8> {
    (0..128u32).map(|i| (i * 37 + 11) as u8).collect()
}

/// In a child copy: act as the rank the variable names, report, exit. Returns in the
/// parent (variable unset).
fn run_child_if_asked() {
    let Ok(role) = std::env::var(CHILD_VAR) else {
        return;
    };
    let mut parts = role.splitn(3, ':');
    let rank: usize = parts.next().unwrap().parse().unwrap();
    let size: usize = parts.next().unwrap().parse().unwrap();
    let master = parts.next().unwrap();
    let code = match Rendezvous::join(master, rank, size, TIMEOUT).and_then(|mut z| {
        z.barrier()?;
        Ok(z)
    }) {
        Ok(z) => {
            println!("\nRECEIVED {}", hex(z.payload()));
            0
        }
        Err(e) => {
            println!("\nERROR {e}");
            1
        }
    };
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    std::process::exit(code);
}

/// Start a copy of this test binary running test `name` as `rank` of `size`.
fn spawn_rank(name: &str, rank: usize, size: usize, master: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, format!("{rank}:{size}:{master}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The line a child printed starting with `RECEIVED ` or `ERROR ` (the harness's "test
/// ... " may precede it on its line), and its exit status.
fn report(child: std::process::Child) -> (String, bool) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .filter_map(|l| {
            let at = l.find("RECEIVED ").or_else(|| l.find("ERROR "))?;
            Some(&l[at..])
        })
        .next()
        .unwrap_or_else(|| panic!("the child reported nothing; its stdout:\n{stdout}"))
        .to_string();
    (line, out.status.success())
}

fn processes_receive_rank_0s_bytes(name: &str, size: usize) {
    run_child_if_asked();
    let _ports = ports();
    let root = RendezvousRoot::bind("127.0.0.1:0").unwrap();
    let master = root.local_addr().unwrap().to_string();
    let children: Vec<_> = (1..size)
        .map(|rank| spawn_rank(name, rank, size, &master))
        .collect();
    let id = id_bytes();
    let mut z = root.serve(size, &id, TIMEOUT).unwrap();
    z.barrier().unwrap();
    assert_eq!(z.payload(), &id[..]);
    for (i, child) in children.into_iter().enumerate() {
        let (line, ok) = report(child);
        eprintln!("rank {}: {line}", i + 1);
        assert_eq!(line, format!("RECEIVED {}", hex(&id)), "rank {}", i + 1);
        assert!(ok, "rank {} exited with an error", i + 1);
    }
}

#[test]
fn two_processes_share_an_id() {
    processes_receive_rank_0s_bytes("two_processes_share_an_id", 2);
}

#[test]
fn four_processes_share_an_id() {
    processes_receive_rank_0s_bytes("four_processes_share_an_id", 4);
}

#[test]
fn a_process_with_another_world_size_is_refused_on_both_sides() {
    run_child_if_asked();
    let name = "a_process_with_another_world_size_is_refused_on_both_sides";
    let _ports = ports();
    let root = RendezvousRoot::bind("127.0.0.1:0").unwrap();
    let master = root.local_addr().unwrap().to_string();
    // The child thinks there are 3 ranks; rank 0 knows 2.
    let child = spawn_rank(name, 1, 3, &master);
    let e = root.serve(2, &id_bytes(), TIMEOUT).err().unwrap();
    eprintln!("rank 0: {e}");
    match &e {
        Error::InvalidValue { key, message } => {
            assert_eq!(key, "WORLD_SIZE");
            assert!(
                message.contains("rank 1")
                    && message.contains("was started with 3 ranks, rank 0 with 2"),
                "{message}"
            );
        }
        other => panic!("expected a WORLD_SIZE refusal, got {other:?}"),
    }
    let (line, ok) = report(child);
    eprintln!("rank 1: {line}");
    assert!(!ok, "the child should fail");
    assert!(line.starts_with("ERROR "), "{line}");
    assert!(line.contains("QCD_SOLVE_MASTER"), "{line}");
    assert!(
        line.contains("refused the rendezvous: rank 1")
            && line.contains("was started with 3 ranks, rank 0 with 2"),
        "{line}"
    );
}

#[test]
fn a_peer_that_cannot_reach_the_master_fails_within_its_timeout() {
    // A port nobody listens on: bind one, note it, close it.
    let _ports = ports();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let master = format!("127.0.0.1:{port}");
    let start = Instant::now();
    let e = Rendezvous::join(&master, 1, 2, Duration::from_millis(500))
        .err()
        .unwrap();
    let took = start.elapsed();
    eprintln!("after {:.2} s: {e}", took.as_secs_f64());
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        took >= Duration::from_millis(450),
        "gave up early: {took:?}"
    );
    match &e {
        Error::InvalidValue { key, message } => {
            assert_eq!(key, "QCD_SOLVE_MASTER");
            assert!(
                message.contains(&format!("QCD_SOLVE_MASTER={master}")),
                "{message}"
            );
            assert!(message.contains("within 0.5 s"), "{message}");
        }
        other => panic!("expected a QCD_SOLVE_MASTER error, got {other:?}"),
    }
    // And the exit code a user would see (2: invalid value).
    assert_eq!(e.exit_code(), 2);
}
