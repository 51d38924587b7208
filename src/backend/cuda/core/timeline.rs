//! The graphs' time line (`TuningOptions::timeline`, a diagnostic; the device host has no
//! Nsight Systems): while a CUDA graph is captured, every kernel launch and every
//! collective of the decomposed operator is followed by an event record node
//! (cuEventRecordWithFlags with CU_EVENT_RECORD_EXTERNAL, which capture turns into a node
//! of the graph). Each replay records those events again; the `SNAPSHOT_AT`-th launch of
//! each graph is read at once (`fused::repeat` synchronises after it), the others are not.
//! After the solve: the time of every mark from the graph's first one, on the main stream
//! or the communication stream. The nodes sit between kernels, so programmatic
//! dependent launch is off while the time line is on (`TuningOptions::pdl_on`): a graph with marks is
//! somewhat slower than without, and its gaps are upper bounds.

use crate::backend::cuda::core::device::driver_err;
use crate::error::Result;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};
use std::collections::HashMap;
use std::sync::Arc;

/// The launch of each graph whose marks are kept (the first follows the capture at once;
/// a solve's last launches run after convergence, when the kernels return at once).
pub(crate) const SNAPSHOT_AT: u32 = 3;

/// Marks kept at most (a solve captures a few graphs of a few dozen launches each).
const MAX_MARKS: usize = 4096;

struct Mark {
    /// The capture it belongs to (1 for the first graph captured on this stream).
    graph: u32,
    label: String,
    /// Recorded on another stream than the one the capture began on.
    comm: bool,
    event: CudaEvent,
}

/// One mark of a graph's last replay.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineRow {
    pub graph: u32,
    pub label: String,
    pub comm: bool,
    /// Microseconds from the graph's first mark.
    pub at_us: f64,
    /// Microseconds from the previous mark of the same stream (the first mark: 0).
    pub step_us: f64,
}

/// The marks of the graphs captured on one `GpuStream`.
#[derive(Default)]
pub(crate) struct Timeline {
    marks: Vec<Mark>,
    graphs: u32,
    /// The stream the current capture began on.
    main: Option<sys::CUstream>,
    /// Graphs' marks kept from an earlier replay (`snapshot`).
    snapshots: HashMap<u32, Vec<TimelineRow>>,
}

impl Timeline {
    /// A capture begins on `stream`.
    pub fn begin(&mut self, stream: &CudaStream) {
        self.graphs += 1;
        self.main = Some(stream.cu_stream());
    }

    /// Put an event record node labelled `label` on `stream` (being captured).
    pub fn mark(&mut self, ctx: &Arc<CudaContext>, stream: &CudaStream, label: &str) -> Result<()> {
        if self.marks.len() >= MAX_MARKS {
            return Ok(());
        }
        let event = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| driver_err("creating a time-line event", e))?;
        // SAFETY: the event and the stream are live handles of this context, which
        // new_event bound to this thread.
        unsafe {
            sys::cuEventRecordWithFlags(
                event.cu_event(),
                stream.cu_stream(),
                sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32,
            )
        }
        .result()
        .map_err(|e| driver_err("recording a time-line event in a capture", e))?;
        self.marks.push(Mark {
            graph: self.graphs,
            label: label.to_string(),
            comm: self.main != Some(stream.cu_stream()),
            event,
        });
        Ok(())
    }

    /// The graph the last capture made (0 before any).
    pub fn current(&self) -> u32 {
        self.graphs
    }

    /// Keep graph `g`'s marks as they are now (the stream synchronised after one of its
    /// replays): `rows` gives these instead of the last replay's. A solve's last replays
    /// run after convergence, when every kernel returns at once; a replay early in the
    /// solve shows the iterations at work.
    pub fn snapshot(&mut self, g: u32) {
        let rows = self.graph_rows(g);
        if !rows.is_empty() {
            self.snapshots.insert(g, rows);
        }
    }

    /// Every graph's marks: as kept by `snapshot`, else as of its last replay (the stream
    /// must be synchronised). A graph whose events cannot be read (not replayed) is left
    /// out.
    pub fn rows(&self) -> Vec<TimelineRow> {
        (1..=self.graphs)
            .flat_map(|g| {
                self.snapshots
                    .get(&g)
                    .cloned()
                    .unwrap_or_else(|| self.graph_rows(g))
            })
            .collect()
    }

    fn graph_rows(&self, g: u32) -> Vec<TimelineRow> {
        let marks: Vec<&Mark> = self.marks.iter().filter(|m| m.graph == g).collect();
        let Some(first) = marks.first() else {
            return Vec::new();
        };
        let times: Option<Vec<f64>> = marks
            .iter()
            .map(|m| {
                first
                    .event
                    .elapsed_ms(&m.event)
                    .ok()
                    .map(|ms| 1e3 * ms as f64)
            })
            .collect();
        let Some(times) = times else {
            return Vec::new();
        };
        let comm: Vec<bool> = marks.iter().map(|m| m.comm).collect();
        steps(&comm, &times)
            .map(|(k, at_us, step_us)| TimelineRow {
                graph: g,
                label: marks[k].label.clone(),
                comm: marks[k].comm,
                at_us,
                step_us,
            })
            .collect()
    }
}

/// (index, time, time since the previous mark of the same stream) for marks on streams
/// `comm` (false: main) at `times`.
fn steps<'a>(comm: &'a [bool], times: &'a [f64]) -> impl Iterator<Item = (usize, f64, f64)> + 'a {
    let mut last = [None::<f64>; 2];
    comm.iter()
        .zip(times)
        .enumerate()
        .map(move |(k, (&c, &t))| {
            let s = last[c as usize].map_or(0.0, |p| t - p);
            last[c as usize] = Some(t);
            (k, t, s)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_taken_per_stream() {
        // main 0, comm 5, main 10, comm 12, main 30: main steps 10 and 20, comm's 7.
        let comm = [false, true, false, true, false];
        let times = [0.0, 5.0, 10.0, 12.0, 30.0];
        let s: Vec<_> = steps(&comm, &times).collect();
        assert_eq!(
            s,
            vec![
                (0, 0.0, 0.0),
                (1, 5.0, 0.0),
                (2, 10.0, 10.0),
                (3, 12.0, 7.0),
                (4, 30.0, 20.0)
            ]
        );
    }
}
