//! A small TCP rendezvous: rank 0 listens at `QCD_SOLVE_MASTER`, every other
//! rank connects and says who it is, and rank 0 checks them (each rank once, all in
//! range, all agreeing on the number of ranks) and sends every one the same bytes (NCCL's
//! 128-byte unique id). The connections then stay open for a host barrier.
//!
//! Protocol (all integers big-endian):
//! - hello, peer to rank 0: `MAGIC` (8 bytes), protocol version (u32), rank (u32), size (u32).
//! - answer, rank 0 to peer: `MAGIC`, version (u32), status (u8: 0 the payload follows,
//!   1 a UTF-8 reason why rank 0 refused the rendezvous follows), length (u32), bytes.
//! - barrier: each peer sends one byte `B`, rank 0 answers each with `B` once all came.
//!
//! A connection whose first bytes are not `MAGIC` (a port scanner, a stray client) is
//! dropped and rank 0 keeps waiting. std::net only.

use super::launch::MASTER_VAR;
use crate::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The first bytes of every hello and answer.
pub const MAGIC: [u8; 8] = *b"QCDSOLVE";
/// The protocol version; both sides must agree.
pub const VERSION: u32 = 1;
/// The largest payload accepted (the NCCL id is 128 bytes).
pub const MAX_PAYLOAD: usize = 1 << 20;

const HELLO_LEN: usize = 8 + 4 + 4 + 4;
const BARRIER_BYTE: u8 = b'B';

/// Rank 0's listening socket, bound before the others are started (tests bind port 0 and
/// hand the chosen port to the others).
pub struct RendezvousRoot {
    listener: TcpListener,
    master: String,
}

/// One rank's end of a finished rendezvous: the payload and the open connections (rank 0:
/// one per other rank, in rank order; another rank: one to rank 0).
pub struct Rendezvous {
    rank: usize,
    size: usize,
    payload: Vec<u8>,
    links: Vec<TcpStream>,
    timeout: Duration,
}

impl RendezvousRoot {
    /// Listen at `master` (host:port; port 0 picks a free one, see `local_addr`).
    pub fn bind(master: &str) -> Result<RendezvousRoot> {
        let listener = TcpListener::bind(master).map_err(|e| {
            Error::invalid(
                MASTER_VAR,
                format!(
                    "rank 0 cannot listen at `{master}`: {e} (it must be an address of rank \
                     0's host and a free port)"
                ),
            )
        })?;
        Ok(RendezvousRoot {
            listener,
            master: master.to_string(),
        })
    }

    /// The address actually bound (the port chosen when `master` gave port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io(self.master.as_str(), e))
    }

    /// Wait (at most `timeout`) for ranks 1..size, check their hellos, send each
    /// `payload`. On a refusal every rank already connected is told why.
    pub fn serve(self, size: usize, payload: &[u8], timeout: Duration) -> Result<Rendezvous> {
        if size == 0 || size > u32::MAX as usize {
            return Err(Error::internal(format!("rendezvous: {size} ranks")));
        }
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::internal(format!(
                "rendezvous: a payload of {} bytes (at most {MAX_PAYLOAD})",
                payload.len()
            )));
        }
        let start = Instant::now();
        let deadline = start + timeout;
        let mut peers: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        let mut joined = 1;
        let io = |e: std::io::Error| Error::io(format!("rendezvous at {}", self.master), e);
        self.listener.set_nonblocking(true).map_err(io)?;
        while joined < size {
            let (mut stream, from) = match self.listener.accept() {
                Ok(c) => c,
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted =>
                {
                    if Instant::now() >= deadline {
                        let missing: Vec<String> = (1..size)
                            .filter(|&r| peers[r].is_none())
                            .map(|r| r.to_string())
                            .collect();
                        let why = format!(
                            "rank 0 waited {:.1} s at {} for {} of {} ranks; rank(s) {} never \
                             came (were they started, with the same {MASTER_VAR}?)",
                            timeout.as_secs_f64(),
                            self.master,
                            size - joined,
                            size - 1,
                            missing.join(", ")
                        );
                        refuse_all(&mut peers, &why);
                        return Err(Error::invalid(MASTER_VAR, why));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(e) => return Err(io(e)),
            };
            stream.set_nonblocking(false).map_err(io)?;
            let _ = stream.set_nodelay(true);
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(100));
            stream.set_read_timeout(Some(wait)).map_err(io)?;
            let mut hello = [0u8; HELLO_LEN];
            if stream.read_exact(&mut hello).is_err() || hello[..8] != MAGIC {
                tracing::warn!("rendezvous: dropped a connection from {from} that sent no hello");
                continue;
            }
            let word = |i: usize| u32::from_be_bytes(hello[i..i + 4].try_into().unwrap());
            let (version, rank, their_size) = (word(8), word(12) as usize, word(16) as usize);
            let refusal = if version != VERSION {
                Some((
                    MASTER_VAR,
                    format!(
                        "a process at {from} speaks rendezvous protocol {version}, rank 0 \
                         {VERSION} (different builds of qcd-solve?)"
                    ),
                ))
            } else if their_size != size {
                Some((
                    "WORLD_SIZE",
                    format!(
                        "rank {rank} (at {from}) was started with {their_size} ranks, rank 0 \
                         with {size}"
                    ),
                ))
            } else if rank == 0 || rank >= size {
                Some((
                    "RANK",
                    format!("a process at {from} says it is rank {rank}; expected 1..{size}"),
                ))
            } else if peers[rank].is_some() {
                Some((
                    "RANK",
                    format!("two processes say they are rank {rank} (the second at {from})"),
                ))
            } else {
                None
            };
            if let Some((key, why)) = refusal {
                let _ = send_answer(&mut stream, 1, why.as_bytes());
                refuse_all(&mut peers, &why);
                return Err(Error::invalid(key, format!("rendezvous refused: {why}")));
            }
            peers[rank] = Some(stream);
            joined += 1;
        }
        let mut links = Vec::with_capacity(size - 1);
        for (rank, peer) in peers.into_iter().enumerate().skip(1) {
            let mut stream = peer.expect("every rank joined");
            send_answer(&mut stream, 0, payload).map_err(|e| {
                Error::io(
                    format!("rendezvous at {}: sending to rank {rank}", self.master),
                    e,
                )
            })?;
            links.push(stream);
        }
        tracing::debug!(
            "rendezvous at {}: {} ranks in {:.3} s",
            self.master,
            size,
            start.elapsed().as_secs_f64()
        );
        Ok(Rendezvous {
            rank: 0,
            size,
            payload: payload.to_vec(),
            links,
            timeout,
        })
    }
}

fn refuse_all(peers: &mut [Option<TcpStream>], why: &str) {
    for s in peers.iter_mut().flatten() {
        let _ = send_answer(s, 1, why.as_bytes());
    }
}

fn send_answer(stream: &mut TcpStream, status: u8, bytes: &[u8]) -> std::io::Result<()> {
    let mut msg = Vec::with_capacity(8 + 4 + 1 + 4 + bytes.len());
    msg.extend_from_slice(&MAGIC);
    msg.extend_from_slice(&VERSION.to_be_bytes());
    msg.push(status);
    msg.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    msg.extend_from_slice(bytes);
    stream.write_all(&msg)?;
    stream.flush()
}

impl Rendezvous {
    /// Rank 0: listen at `master`, serve `payload` to ranks 1..size.
    pub fn root(
        master: &str,
        size: usize,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Rendezvous> {
        RendezvousRoot::bind(master)?.serve(size, payload, timeout)
    }

    /// Rank `rank` > 0: connect to rank 0 at `master`, retrying until `timeout` has passed,
    /// then wait (at most `timeout` again) for rank 0's payload.
    pub fn join(master: &str, rank: usize, size: usize, timeout: Duration) -> Result<Rendezvous> {
        if rank == 0 || rank >= size || size > u32::MAX as usize {
            return Err(Error::internal(format!(
                "rendezvous: rank {rank} of {size} cannot join (rank 0 serves)"
            )));
        }
        let start = Instant::now();
        let mut stream = connect(master, rank, start, timeout)?;
        let io = |what: &str, e: std::io::Error| {
            Error::io(format!("rendezvous with rank 0 at {master} ({what})"), e)
        };
        let _ = stream.set_nodelay(true);
        let mut hello = Vec::with_capacity(HELLO_LEN);
        hello.extend_from_slice(&MAGIC);
        hello.extend_from_slice(&VERSION.to_be_bytes());
        hello.extend_from_slice(&(rank as u32).to_be_bytes());
        hello.extend_from_slice(&(size as u32).to_be_bytes());
        stream
            .write_all(&hello)
            .map_err(|e| io("sending hello", e))?;
        // Rank 0 answers once every rank has joined: wait up to `timeout` from now.
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| io("setting a timeout", e))?;
        let mut head = [0u8; 8 + 4 + 1 + 4];
        stream.read_exact(&mut head).map_err(|e| {
            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                Error::invalid(
                    MASTER_VAR,
                    format!(
                        "rank {rank} reached rank 0 at {master} but had no answer within {:.1} s \
                         (are all {size} ranks started?)",
                        timeout.as_secs_f64()
                    ),
                )
            } else {
                io("waiting for the answer", e)
            }
        })?;
        if head[..8] != MAGIC {
            return Err(Error::invalid(
                MASTER_VAR,
                format!("{master} is not a qcd-solve rendezvous (it answered something else)"),
            ));
        }
        let version = u32::from_be_bytes(head[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(Error::invalid(
                MASTER_VAR,
                format!("rank 0 speaks rendezvous protocol {version}, rank {rank} {VERSION}"),
            ));
        }
        let status = head[12];
        let len = u32::from_be_bytes(head[13..17].try_into().unwrap()) as usize;
        if len > MAX_PAYLOAD {
            return Err(Error::invalid(
                MASTER_VAR,
                format!("rank 0 at {master} announced {len} bytes (at most {MAX_PAYLOAD})"),
            ));
        }
        let mut bytes = vec![0u8; len];
        stream
            .read_exact(&mut bytes)
            .map_err(|e| io("reading the payload", e))?;
        match status {
            0 => Ok(Rendezvous {
                rank,
                size,
                payload: bytes,
                links: vec![stream],
                timeout,
            }),
            1 => Err(Error::invalid(
                MASTER_VAR,
                format!(
                    "rank 0 at {master} refused the rendezvous: {}",
                    String::from_utf8_lossy(&bytes)
                ),
            )),
            s => Err(Error::invalid(
                MASTER_VAR,
                format!("rank 0 at {master} answered with status {s}"),
            )),
        }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Rank 0's payload (the same bytes on every rank).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Wait until every rank has called `barrier` (at most the rendezvous timeout).
    pub fn barrier(&mut self) -> Result<()> {
        let timeout = self.timeout;
        let fail = |what: String, e: std::io::Error| Error::io(format!("barrier: {what}"), e);
        if self.rank == 0 {
            for (i, s) in self.links.iter_mut().enumerate() {
                s.set_read_timeout(Some(timeout))
                    .map_err(|e| fail(format!("rank {}", i + 1), e))?;
                let mut b = [0u8];
                s.read_exact(&mut b)
                    .map_err(|e| fail(format!("waiting for rank {}", i + 1), e))?;
                if b[0] != BARRIER_BYTE {
                    return Err(Error::internal(format!(
                        "barrier: rank {} sent {:#04x}",
                        i + 1,
                        b[0]
                    )));
                }
            }
            for (i, s) in self.links.iter_mut().enumerate() {
                s.write_all(&[BARRIER_BYTE])
                    .map_err(|e| fail(format!("releasing rank {}", i + 1), e))?;
            }
        } else {
            let s = &mut self.links[0];
            s.write_all(&[BARRIER_BYTE])
                .map_err(|e| fail("telling rank 0".into(), e))?;
            s.set_read_timeout(Some(timeout))
                .map_err(|e| fail("rank 0".into(), e))?;
            let mut b = [0u8];
            s.read_exact(&mut b)
                .map_err(|e| fail("waiting for rank 0".into(), e))?;
            if b[0] != BARRIER_BYTE {
                return Err(Error::internal(format!(
                    "barrier: rank 0 sent {:#04x}",
                    b[0]
                )));
            }
        }
        Ok(())
    }
}

/// Connect to `master`, retrying (refused, unreachable, not yet resolvable) until
/// `timeout` after `start`.
fn connect(master: &str, rank: usize, start: Instant, timeout: Duration) -> Result<TcpStream> {
    let deadline = start + timeout;
    let mut pause = Duration::from_millis(20);
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = master
            .to_socket_addrs()
            .and_then(|mut addrs| {
                addrs.next().ok_or_else(|| {
                    std::io::Error::new(ErrorKind::NotFound, "the host name has no address")
                })
            })
            .and_then(|addr| {
                TcpStream::connect_timeout(
                    &addr,
                    left.clamp(Duration::from_millis(10), Duration::from_secs(5)),
                )
            });
        let e = match attempt {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::invalid(
                MASTER_VAR,
                format!(
                    "rank {rank} could not reach rank 0's rendezvous at {MASTER_VAR}={master} \
                     within {:.1} s ({tries} tries; last: {e}): is rank 0 running, listening \
                     there, and reachable from this host?",
                    timeout.as_secs_f64()
                ),
            ));
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(20);

    fn root() -> (RendezvousRoot, String) {
        let r = RendezvousRoot::bind("127.0.0.1:0").unwrap();
        let addr = r.local_addr().unwrap().to_string();
        (r, addr)
    }

    #[test]
    fn threads_get_rank_0s_bytes_and_pass_a_barrier() {
        let (r, addr) = root();
        let payload: Vec<u8> = (0..128).map(|i| (i * 37 + 11) as u8).collect();
        let got = std::thread::scope(|s| {
            let peers: Vec<_> = (1..4)
                .map(|rank| {
                    let addr = addr.clone();
                    s.spawn(move || {
                        let mut z = Rendezvous::join(&addr, rank, 4, T).unwrap();
                        z.barrier().unwrap();
                        z.payload().to_vec()
                    })
                })
                .collect();
            let mut z = r.serve(4, &payload, T).unwrap();
            z.barrier().unwrap();
            assert_eq!(z.payload(), &payload[..]);
            peers
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        for p in got {
            assert_eq!(p, payload);
        }
    }

    #[test]
    fn a_duplicate_rank_is_refused_on_both_sides() {
        let (r, addr) = root();
        std::thread::scope(|s| {
            let peers: Vec<_> = (0..2)
                .map(|_| {
                    let addr = addr.clone();
                    s.spawn(move || Rendezvous::join(&addr, 1, 3, T).err().unwrap().to_string())
                })
                .collect();
            let e = r.serve(3, b"id", T).err().unwrap();
            assert!(
                matches!(&e, Error::InvalidValue { key, .. } if key == "RANK"),
                "{e}"
            );
            assert!(
                e.to_string().contains("two processes say they are rank 1"),
                "{e}"
            );
            for p in peers {
                let m = p.join().unwrap();
                assert!(
                    m.contains("refused the rendezvous: two processes say they are rank 1"),
                    "{m}"
                );
            }
        });
    }

    #[test]
    fn rank_0_gives_up_naming_the_missing_ranks() {
        let (r, addr) = root();
        std::thread::scope(|s| {
            let p = s.spawn(move || Rendezvous::join(&addr, 2, 3, T).err().unwrap().to_string());
            let e = r
                .serve(3, b"id", Duration::from_millis(300))
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("rank(s) 1 never came"), "{e}");
            let m = p.join().unwrap();
            assert!(m.contains("rank(s) 1 never came"), "{m}");
        });
    }

    #[test]
    fn a_stray_connection_is_ignored() {
        let (r, addr) = root();
        std::thread::scope(|s| {
            let a = addr.clone();
            let p = s.spawn(move || {
                let mut stray = TcpStream::connect(&a).unwrap();
                stray.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
                drop(stray);
                Rendezvous::join(&a, 1, 2, T).unwrap().payload().to_vec()
            });
            r.serve(2, b"the id", T).unwrap();
            assert_eq!(p.join().unwrap(), b"the id");
        });
    }
}
