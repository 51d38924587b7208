//! NCCL on one GPU (issue 11): a communicator of one rank on GPU 0, through every path of
//! `NcclComms` (host Comms, DeviceExchange to the own rank, global_sum_on, a CUDA graph
//! holding both). Built only with `--features gpu-tests`; every test fails loudly (never
//! skips) when there is no GPU, no libnccl.so or no libnvrtc on the loader path.
//!
//! Expected values are exact: with one rank a gather or a sum is the input itself, bit
//! for bit, and a message arrives unchanged. NVLink multicast stays off
//! (NCCL_NVLS_ENABLE=0, set here before NCCL starts; the device machine sets it too).
//!
//! `two_processes_on_two_gpus` (ignored: it needs 2 GPUs) starts a copy of this binary as
//! rank 1 and checks the same paths between two real ranks; run it with `--ignored` on a
//! machine of two GPUs.
//!
//! Running (cudarc loads NCCL as libnccl.so, which NCCL does not install: link it):
//! ```sh
//! cargo test --release --features gpu-tests --test gpu_nccl --no-run   # prints the binary
//! # on the GPU machine:
//! lib=$(find / -name 'libnccl.so.2*' -not -path '/proc/*' 2>/dev/null | head -1)
//! mkdir -p /tmp/nccl && ln -sf "$lib" /tmp/nccl/libnccl.so
//! LD_LIBRARY_PATH=/tmp/nccl:$LD_LIBRARY_PATH NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN \
//!     ./gpu_nccl-HASH --test-threads=1 --nocapture
//! ```

use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DevicePtr};
use qcd_solve::comms::launch::Launch;
use qcd_solve::comms::nccl::communicator::NcclComms;
use qcd_solve::comms::nccl::library::{nccl_version, require_nccl, ID_BYTES};
use qcd_solve::comms::{global_sum, Comms, DeviceExchange, DeviceMessage, Incoming, Outgoing};
use std::sync::Arc;

/// GPU 0's context and a stream on it, or a panic saying what is missing.
fn gpu() -> Arc<CudaStream> {
    match std::env::var("NCCL_NVLS_ENABLE") {
        Ok(v) if v != "0" => panic!("NCCL_NVLS_ENABLE={v}: these tests run with it 0"),
        _ => std::env::set_var("NCCL_NVLS_ENABLE", "0"),
    }
    if let Err(e) = require_nccl() {
        panic!("the NCCL gpu tests need an NVIDIA GPU, its driver and libnccl.so: {e}");
    }
    // SAFETY: only tries to dlopen the library by its usual names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        panic!("the NCCL gpu tests need libnvrtc (libnvrtc.so.13) on LD_LIBRARY_PATH");
    }
    let ctx = CudaContext::new(0)
        .unwrap_or_else(|e| panic!("the NCCL gpu tests need GPU 0, which did not open: {e}"));
    eprintln!(
        "GPU 0: {}; NCCL {}",
        ctx.name().unwrap_or_default(),
        nccl_version().unwrap()
    );
    // One stream carries everything: no per-buffer event tracking (as the backend).
    // SAFETY: all work of these tests goes to this one stream.
    unsafe { ctx.disable_event_tracking() };
    ctx.new_stream().unwrap()
}

fn one_rank(stream: &Arc<CudaStream>) -> NcclComms {
    let id = qcd_solve::comms::nccl::library::new_unique_id().unwrap();
    NcclComms::new(stream.clone(), 0, 1, &id).unwrap()
}

fn ptr(s: &CudaSlice<f64>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

fn download(stream: &Arc<CudaStream>, s: &CudaSlice<f64>) -> Vec<f64> {
    let v = stream.clone_dtoh(s).unwrap();
    stream.synchronize().unwrap();
    v
}

/// Values whose every bit matters: signs, tiny, huge, non-representable sums.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            let m = (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            m * 10f64.powi((i % 37) as i32 - 18)
        })
        .collect()
}

fn assert_bits(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bad = got
        .iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits());
    if let Some(i) = bad {
        panic!(
            "{what}: element {i} is {:e}, expected {:e}",
            got[i], want[i]
        );
    }
    eprintln!(
        "{what}: {} values equal bit for bit (first {:e}, last {:e})",
        got.len(),
        got[0],
        got[got.len() - 1]
    );
}

/// A CUDA graph holding `exchange_on(send, recv)` then `global_sum_on(src -> dst, n)`,
/// captured on `stream` (prepared outside the capture by the caller).
fn capture_exchange_and_sum(
    c: &mut NcclComms,
    stream: &Arc<CudaStream>,
    send: DeviceMessage,
    recv: DeviceMessage,
    src: u64,
    dst: u64,
    n: usize,
) -> cudarc::driver::CudaGraph {
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    let captured = c
        .exchange_on(stream, &[send], &[recv])
        .and_then(|_| c.global_sum_on(stream, src, dst, n));
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("the capture recorded no work");
    captured.unwrap();
    graph
}

#[test]
fn one_rank_opens_reports_its_version_and_finishes() {
    let stream = gpu();
    let v = nccl_version().unwrap();
    eprintln!("nccl_version() = {v}");
    let parts: Vec<u32> = v.split('.').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts.len(), 3, "{v}");
    assert!(parts[0] >= 2, "{v}");
    let c = one_rank(&stream);
    eprintln!("describe: {}", Comms::describe(&c));
    assert_eq!(Comms::describe(&c), format!("nccl {v} (1 ranks)"));
    assert_eq!((Comms::rank(&c), Comms::size(&c)), (0, 1));
    assert_eq!((DeviceExchange::rank(&c), DeviceExchange::size(&c)), (0, 1));
    assert_eq!(c.version(), v);
    c.finish().unwrap();
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let stream = gpu();
    let e = NcclComms::new(stream.clone(), 0, 1, &[0u8; 16])
        .err()
        .unwrap();
    eprintln!("{e}");
    assert!(e.to_string().contains("16 bytes (expected 128)"), "{e}");
    let e = NcclComms::new(stream.clone(), 1, 1, &[0u8; ID_BYTES])
        .err()
        .unwrap();
    eprintln!("{e}");
    assert!(e.to_string().contains("rank 1 of 1"), "{e}");
    let mut c = one_rank(&stream);
    let buf = stream.alloc_zeros::<f64>(4).unwrap();
    let p = ptr(&buf, &stream);
    let m = DeviceMessage {
        peer: 1,
        tag: 0,
        ptr: p,
        bytes: 32,
    };
    let e = c.exchange_on(&stream, &[m], &[]).err().unwrap();
    eprintln!("{e}");
    assert!(e.to_string().contains("for rank 1 of 1"), "{e}");
}

#[test]
fn host_comms_gather_sum_and_exchange_with_one_rank() {
    let stream = gpu();
    let mut c = one_rank(&stream);
    let vals = [1.5, -2.25, 1e-300, 3.0e16, -0.0, f64::MIN_POSITIVE];
    let all = c.all_gather(&vals).unwrap();
    assert_bits(&all, &vals, "Comms::all_gather");
    let sum = global_sum(&mut c, &vals).unwrap();
    assert_bits(&sum, &vals, "global_sum");
    // Two messages to self, received in the other order: paired by tag.
    let (a, b) = (values(5, 1), values(300, 2));
    let (mut x, mut y) = (vec![0.0; 5], vec![0.0; 300]);
    c.exchange(
        &[
            Outgoing {
                to: 0,
                tag: 7,
                data: &a,
            },
            Outgoing {
                to: 0,
                tag: 3,
                data: &b,
            },
        ],
        &mut [
            Incoming {
                from: 0,
                tag: 3,
                data: &mut y,
            },
            Incoming {
                from: 0,
                tag: 7,
                data: &mut x,
            },
        ],
    )
    .unwrap();
    assert_bits(&x, &a, "Comms::exchange tag 7");
    assert_bits(&y, &b, "Comms::exchange tag 3");
    let s = c.stats();
    eprintln!("stats: {s:?}");
    assert_eq!(s.exchanges, 1);
    assert_eq!(s.bytes_sent, 8 * 305);
    assert_eq!(s.gathers, 1);
}

#[test]
fn device_exchange_to_the_own_rank_delivers_the_bytes() {
    let stream = gpu();
    let mut c = one_rank(&stream);
    let (a, b) = (values(1000, 3), values(7, 4));
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let ra = stream.alloc_zeros::<f64>(1000).unwrap();
    let rb = stream.alloc_zeros::<f64>(7).unwrap();
    let msg = |tag, s: &CudaSlice<f64>| DeviceMessage {
        peer: 0,
        tag,
        ptr: ptr(s, &stream),
        bytes: 8 * s.len(),
    };
    // Sent as (tag 5, tag 2), received as (tag 2, tag 5).
    c.exchange_on(
        &stream,
        &[msg(5, &da), msg(2, &db)],
        &[msg(2, &rb), msg(5, &ra)],
    )
    .unwrap();
    assert_bits(
        &download(&stream, &ra),
        &a,
        "exchange_on tag 5 (8000 bytes)",
    );
    assert_bits(&download(&stream, &rb), &b, "exchange_on tag 2 (56 bytes)");
}

#[test]
fn global_sum_on_one_rank_is_the_input() {
    let stream = gpu();
    let mut c = one_rank(&stream);
    for n in [1, 5, 3000, 300_000] {
        let v = values(n, n as u64);
        let src = stream.clone_htod(&v).unwrap();
        let dst = stream.alloc_zeros::<f64>(n).unwrap();
        c.global_sum_on(&stream, ptr(&src, &stream), ptr(&dst, &stream), n)
            .unwrap();
        assert_bits(
            &download(&stream, &dst),
            &v,
            &format!("global_sum_on n={n}"),
        );
        // In place.
        c.global_sum_on(&stream, ptr(&src, &stream), ptr(&src, &stream), n)
            .unwrap();
        assert_bits(
            &download(&stream, &src),
            &v,
            &format!("global_sum_on in place n={n}"),
        );
    }
}

#[test]
fn a_cuda_graph_holds_an_exchange_and_a_global_sum() {
    let stream = gpu();
    let mut c = one_rank(&stream);
    let n = 4096;
    let mut input = stream.alloc_zeros::<f64>(n).unwrap();
    let faces = stream.alloc_zeros::<f64>(n).unwrap();
    let sums = stream.alloc_zeros::<f64>(n).unwrap();
    let (pi, pf, ps) = (
        ptr(&input, &stream),
        ptr(&faces, &stream),
        ptr(&sums, &stream),
    );
    let send = DeviceMessage {
        peer: 0,
        tag: 1,
        ptr: pi,
        bytes: 8 * n,
    };
    let recv = DeviceMessage { ptr: pf, ..send };
    // Outside a capture first: the kernel is compiled, the scratch allocated and NCCL's
    // connection to the own rank set up.
    c.prepare_global_sum(n).unwrap();
    c.exchange_on(&stream, &[send], &[recv]).unwrap();
    c.global_sum_on(&stream, pf, ps, n).unwrap();
    stream.synchronize().unwrap();

    let graph = capture_exchange_and_sum(&mut c, &stream, send, recv, pf, ps, n);

    for k in 0..3u64 {
        let v = values(n, 100 + k);
        // Into the captured buffer itself: the graph reads `input`'s address.
        stream.memcpy_htod(&v, &mut input).unwrap();
        stream.synchronize().unwrap();
        graph.launch().unwrap();
        stream.synchronize().unwrap();
        assert_bits(
            &download(&stream, &faces),
            &v,
            &format!("graph replay {k}: exchange_on"),
        );
        assert_bits(
            &download(&stream, &sums),
            &v,
            &format!("graph replay {k}: global_sum_on"),
        );
    }
}

#[path = "gpu_nccl/fused.rs"]
mod fused;

#[test]
fn from_launch_with_one_rank_needs_no_master() {
    let stream = gpu();
    let launch = Launch::from_lookup(|k| match k {
        "RANK" => Some("0".into()),
        "WORLD_SIZE" => Some("1".into()),
        "LOCAL_RANK" => Some("0".into()),
        _ => None,
    })
    .unwrap()
    .expect("RANK and WORLD_SIZE make a launch");
    assert_eq!(launch.master, None);
    for l in [Some(&launch), None] {
        let mut c = NcclComms::from_launch(stream.clone(), l).unwrap();
        eprintln!(
            "from_launch({:?}): {}",
            l.map(|l| l.launcher),
            Comms::describe(&c)
        );
        assert_eq!((Comms::rank(&c), Comms::size(&c)), (0, 1));
        let all = c.all_gather(&[0.1, 0.2]).unwrap();
        assert_bits(&all, &[0.1, 0.2], "all_gather after from_launch");
    }
}

/// Rank `QCD_SOLVE_NCCL_CHILD` of two, in a copy of this binary (set by the parent).
const CHILD_VAR: &str = "QCD_SOLVE_NCCL_CHILD";

/// What every check of the two-rank test does on rank `rank` (GPU `rank`), panicking on
/// a mismatch. The expected values are computed on the host in rank order.
fn two_rank_body(rank: usize, master: &str) {
    std::env::set_var("NCCL_NVLS_ENABLE", "0");
    require_nccl().unwrap();
    let ctx = CudaContext::new(rank)
        .unwrap_or_else(|e| panic!("rank {rank}: GPU {rank} did not open: {e}"));
    // SAFETY: all work of this rank goes to its one stream.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let vars = [
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", "2".to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("QCD_SOLVE_MASTER", master.to_string()),
        ("QCD_SOLVE_RENDEZVOUS_TIMEOUT", "60".to_string()),
    ];
    let launch =
        Launch::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
            .unwrap()
            .unwrap();
    let mut c = NcclComms::from_launch(stream.clone(), Some(&launch)).unwrap();
    eprintln!("rank {rank}: {}", Comms::describe(&c));
    assert_eq!((Comms::rank(&c), Comms::size(&c)), (rank, 2));
    let other = 1 - rank;
    let tag = |r: usize| format!("rank {r}");

    // Host all_gather and the rank-order global sum.
    let mine = [rank as f64 + 1.0, 10.0 * (rank as f64 + 1.0)];
    let all = c.all_gather(&mine).unwrap();
    assert_bits(
        &all,
        &[1.0, 10.0, 2.0, 20.0],
        &format!("{}: all_gather", tag(rank)),
    );
    let parts = [values(64, 10), values(64, 11)];
    let want: Vec<f64> = parts[0].iter().zip(&parts[1]).map(|(a, b)| a + b).collect();
    let sum = global_sum(&mut c, &parts[rank]).unwrap();
    assert_bits(&sum, &want, &format!("{}: global_sum", tag(rank)));

    // Host exchange with the other rank, two tags asked for in the other order.
    let (a, b) = (values(3, rank as u64), values(50, 7 + rank as u64));
    let (mut x, mut y) = (vec![0.0; 3], vec![0.0; 50]);
    c.exchange(
        &[
            Outgoing {
                to: other,
                tag: 1,
                data: &a,
            },
            Outgoing {
                to: other,
                tag: 2,
                data: &b,
            },
        ],
        &mut [
            Incoming {
                from: other,
                tag: 2,
                data: &mut y,
            },
            Incoming {
                from: other,
                tag: 1,
                data: &mut x,
            },
        ],
    )
    .unwrap();
    assert_bits(
        &x,
        &values(3, other as u64),
        &format!("{}: exchange tag 1", tag(rank)),
    );
    assert_bits(
        &y,
        &values(50, 7 + other as u64),
        &format!("{}: exchange tag 2", tag(rank)),
    );

    // Device exchange, global_sum_on, then both in a graph replayed twice.
    let n = 2048;
    let mut input = stream.alloc_zeros::<f64>(n).unwrap();
    let faces = stream.alloc_zeros::<f64>(n).unwrap();
    let sums = stream.alloc_zeros::<f64>(n).unwrap();
    let (pi, pf, ps) = (
        ptr(&input, &stream),
        ptr(&faces, &stream),
        ptr(&sums, &stream),
    );
    let send = DeviceMessage {
        peer: other,
        tag: 3,
        ptr: pi,
        bytes: 8 * n,
    };
    let recv = DeviceMessage { ptr: pf, ..send };
    c.prepare_global_sum(n).unwrap();
    let check = |k: u64, what: &str| {
        let theirs = values(n, 1000 * k + other as u64);
        let (v0, v1) = (values(n, 1000 * k), values(n, 1000 * k + 1));
        let want: Vec<f64> = v0.iter().zip(&v1).map(|(a, b)| a + b).collect();
        assert_bits(
            &download(&stream, &faces),
            &theirs,
            &format!("{} {what}: exchange_on", tag(rank)),
        );
        assert_bits(
            &download(&stream, &sums),
            &want,
            &format!("{} {what}: global_sum_on", tag(rank)),
        );
    };
    stream
        .memcpy_htod(&values(n, rank as u64), &mut input)
        .unwrap();
    c.exchange_on(&stream, &[send], &[recv]).unwrap();
    c.global_sum_on(&stream, pi, ps, n).unwrap();
    stream.synchronize().unwrap();
    check(0, "direct");
    let graph = capture_exchange_and_sum(&mut c, &stream, send, recv, pi, ps, n);
    for k in 1..3u64 {
        stream
            .memcpy_htod(&values(n, 1000 * k + rank as u64), &mut input)
            .unwrap();
        graph.launch().unwrap();
        stream.synchronize().unwrap();
        check(k, &format!("graph replay {k}"));
    }
    drop(graph);
    c.finish().unwrap();
}

#[test]
#[ignore = "needs 2 GPUs: run with --ignored on a machine of two GPUs"]
fn two_processes_on_two_gpus() {
    if let Ok(master) = std::env::var(CHILD_VAR) {
        two_rank_body(1, &master);
        println!("\nNCCL-CHILD OK");
        return;
    }
    if let Err(e) = require_nccl() {
        panic!("the NCCL gpu tests need an NVIDIA GPU, its driver and libnccl.so: {e}");
    }
    cudarc::driver::result::init().unwrap();
    let gpus = CudaContext::device_count().unwrap();
    assert!(
        gpus >= 2,
        "two_processes_on_two_gpus needs 2 GPUs, this machine has {gpus}"
    );
    // A free port for rank 0's rendezvous (bound, noted, released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let master = format!("127.0.0.1:{port}");
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "two_processes_on_two_gpus",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, &master)
        .env("NCCL_NVLS_ENABLE", "0")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // If rank 0 fails, rank 1 would wait in NCCL for ever: end it first.
    let mut child = child;
    if let Err(panic) = std::panic::catch_unwind(|| two_rank_body(0, &master)) {
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(panic);
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("rank 1 stdout:\n{stdout}");
    assert!(out.status.success(), "rank 1 failed: {}", out.status);
    assert!(stdout.contains("NCCL-CHILD OK"), "rank 1 did not finish");
}
