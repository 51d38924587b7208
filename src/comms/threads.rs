//! Ranks as threads of one process: messages are copied over channels. The CPU backend
//! runs the same decomposition as the GPUs through it, so the decomposed operator and the
//! solvers are tested without a GPU.

use super::{check_len, Comms, CommsStats, Incoming, Outgoing};
use crate::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// The tag of all_gather's messages (exchanges use smaller tags).
const GATHER_TAG: u32 = u32::MAX;

/// How long a rank waits for a message before calling it a deadlock.
const PATIENCE: Duration = Duration::from_secs(120);

struct Message {
    from: usize,
    tag: u32,
    data: Vec<f64>,
}

/// One rank of a world of threads (`ThreadComms::world`).
pub struct ThreadComms {
    rank: usize,
    to: Vec<Sender<Message>>,
    inbox: Receiver<Message>,
    /// Messages that arrived before they were asked for, per (sender, tag), in order.
    early: HashMap<(usize, u32), VecDeque<Vec<f64>>>,
    patience: Duration,
    stats: CommsStats,
}

impl ThreadComms {
    /// The `size` ranks of one world; move each to its own thread.
    pub fn world(size: usize) -> Vec<ThreadComms> {
        let (senders, inboxes): (Vec<_>, Vec<_>) = (0..size).map(|_| channel()).unzip();
        inboxes
            .into_iter()
            .enumerate()
            .map(|(rank, inbox)| ThreadComms {
                rank,
                to: senders.clone(),
                inbox,
                early: HashMap::new(),
                patience: PATIENCE,
                stats: CommsStats::default(),
            })
            .collect()
    }

    /// Wait at most this long for a message (default 120 s).
    pub fn set_patience(&mut self, patience: Duration) {
        self.patience = patience;
    }

    fn send(&mut self, to: usize, tag: u32, data: &[f64]) -> Result<()> {
        let message = Message {
            from: self.rank,
            tag,
            data: data.to_vec(),
        };
        self.stats.bytes_sent += 8 * data.len() as u64;
        self.to
            .get(to)
            .ok_or_else(|| Error::internal(format!("rank {}: no rank {to}", self.rank)))?
            .send(message)
            .map_err(|_| Error::internal(format!("rank {}: rank {to} has gone", self.rank)))
    }

    fn receive(&mut self, from: usize, tag: u32) -> Result<Vec<f64>> {
        if let Some(data) = self.early.get_mut(&(from, tag)).and_then(|q| q.pop_front()) {
            return Ok(data);
        }
        loop {
            let m = match self.inbox.recv_timeout(self.patience) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(Error::internal(format!(
                        "rank {} waited {:.1} s for tag {tag} from rank {from}",
                        self.rank,
                        self.patience.as_secs_f64()
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::internal(format!(
                        "rank {}: every other rank has gone",
                        self.rank
                    )))
                }
            };
            if m.from == from && m.tag == tag {
                return Ok(m.data);
            }
            self.early
                .entry((m.from, m.tag))
                .or_default()
                .push_back(m.data);
        }
    }
}

impl Comms for ThreadComms {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.to.len()
    }
    fn describe(&self) -> String {
        format!("threads ({} ranks)", self.size())
    }
    fn exchange(&mut self, sends: &[Outgoing<'_>], recvs: &mut [Incoming<'_>]) -> Result<()> {
        let start = Instant::now();
        self.stats.exchanges += 1;
        for s in sends {
            self.send(s.to, s.tag, s.data)?;
        }
        for r in recvs.iter_mut() {
            let data = self.receive(r.from, r.tag)?;
            check_len(data.len(), r, self.rank)?;
            r.data.copy_from_slice(&data);
        }
        self.stats.seconds += start.elapsed().as_secs_f64();
        Ok(())
    }
    fn all_gather(&mut self, local: &[f64]) -> Result<Vec<f64>> {
        let start = Instant::now();
        self.stats.gathers += 1;
        let me = self.rank;
        for to in (0..self.size()).filter(|&r| r != me) {
            self.send(to, GATHER_TAG, local)?;
        }
        let mut all = Vec::with_capacity(local.len() * self.size());
        for from in 0..self.size() {
            if from == self.rank {
                all.extend_from_slice(local);
            } else {
                let part = self.receive(from, GATHER_TAG)?;
                if part.len() != local.len() {
                    return Err(Error::internal(format!(
                        "all_gather: rank {from} gave {} values, rank {} {}",
                        part.len(),
                        self.rank,
                        local.len()
                    )));
                }
                all.extend_from_slice(&part);
            }
        }
        self.stats.seconds += start.elapsed().as_secs_f64();
        Ok(all)
    }
    fn stats(&self) -> CommsStats {
        self.stats
    }
}

/// Run `body` on every rank of a world of `size` threads and return the results in rank
/// order (the first error, if any rank failed).
pub fn run_ranks<T: Send>(
    size: usize,
    body: impl Fn(ThreadComms) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let world: Vec<std::sync::Mutex<Option<ThreadComms>>> = ThreadComms::world(size)
        .into_iter()
        .map(|c| std::sync::Mutex::new(Some(c)))
        .collect();
    on_threads(size, |rank| {
        let comms = world[rank]
            .lock()
            .map_err(|_| Error::internal("a rank's communicator lock was poisoned"))?
            .take()
            .ok_or_else(|| Error::internal("a rank's communicator was taken twice"))?;
        body(comms)
    })
}

/// Run `body(rank)` on a thread per rank, results in rank order (the first error in rank
/// order if any failed; a rank that fails makes the ranks waiting for it fail too).
pub fn on_threads<T: Send>(
    ranks: usize,
    body: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..ranks)
            .map(|rank| {
                let body = &body;
                s.spawn(move || body(rank))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("a rank's thread panicked")))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comms::global_sum;

    #[test]
    fn exchange_pairs_messages_by_sender_and_tag() {
        // A ring of 4: each rank sends its number (tag 1) and its square (tag 2) forward
        // and receives both from behind, asked for in the opposite order.
        let got = run_ranks(4, |mut c| {
            let r = c.rank();
            let fwd = (r + 1) % 4;
            let back = (r + 3) % 4;
            let (a, b) = ([r as f64], [(r * r) as f64]);
            let (mut x, mut y) = ([0.0], [0.0]);
            c.exchange(
                &[
                    Outgoing {
                        to: fwd,
                        tag: 1,
                        data: &a,
                    },
                    Outgoing {
                        to: fwd,
                        tag: 2,
                        data: &b,
                    },
                ],
                &mut [
                    Incoming {
                        from: back,
                        tag: 2,
                        data: &mut y,
                    },
                    Incoming {
                        from: back,
                        tag: 1,
                        data: &mut x,
                    },
                ],
            )?;
            Ok((x[0], y[0]))
        })
        .unwrap();
        for (r, (x, y)) in got.into_iter().enumerate() {
            let back = (r + 3) % 4;
            assert_eq!((x, y), (back as f64, (back * back) as f64));
        }
    }

    #[test]
    fn global_sums_are_the_same_bits_on_every_rank_and_in_rank_order() {
        // Values whose sum depends on the order of addition: the expected value is the
        // sum in rank order, computed here in the same order.
        let vals = [1e16, 1.0, -1e16, 1.0, 3.5e-7, 2.0, -7.25, 1e-300];
        let expected = vals.iter().fold(0.0, |s, v| s + v);
        for _ in 0..3 {
            let sums = run_ranks(8, |mut c| {
                let v = vals[c.rank()];
                global_sum(&mut c, &[v, 2.0 * v])
            })
            .unwrap();
            for s in &sums {
                assert_eq!(s[0].to_bits(), expected.to_bits());
                assert_eq!(
                    s[1].to_bits(),
                    vals.iter().fold(0.0, |s, v| s + 2.0 * v).to_bits()
                );
            }
        }
    }

    #[test]
    fn a_missing_message_is_an_error_not_a_hang_forever() {
        // Rank 1 never sends: rank 0 gives up after its patience with a message.
        let mut w = ThreadComms::world(2);
        let mut c0 = w.remove(0);
        c0.set_patience(Duration::from_millis(50));
        let mut buf = [0.0];
        let e = c0
            .exchange(
                &[],
                &mut [Incoming {
                    from: 1,
                    tag: 0,
                    data: &mut buf,
                }],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("waited 0.1 s for tag 0 from rank 1"), "{e}");
    }
}
