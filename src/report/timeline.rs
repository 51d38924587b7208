//! The main job's time line: the wall time of the whole process split
//! into the phases a user waits for, each measured with a wall clock around the work
//! itself: read/generate (gauge field read or generated, its plaquette, the source),
//! upload (the backend's construction: device context, kernel compilation, allocation,
//! link layout and upload; then the spinor uploads and the solution's download; on a
//! split lattice the longest rank's share of the problem and backend construction), tune
//! (launch geometry: 0 from the tune cache; split: the longest rank's), solve, verify (the backend's true residual
//! and the CPU's recomputation of ||b - D x||), write (solution and gauge files, each
//! staged and renamed, their CRCs), and other: the rest of the total (process start,
//! memory checks, the report's triad, building the report).

use serde::Serialize;

pub use crate::clock::{mark_process_start, process_seconds, record, steps, timed, Step};

/// The phases of one run, seconds; `other` and `total` are filled by `finish`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeLine {
    pub read_generate: f64,
    pub upload: f64,
    pub tune: f64,
    /// The multigrid's set-up (0 for the other methods).
    pub setup: f64,
    pub solve: f64,
    pub verify: f64,
    pub write: f64,
    /// total minus the named phases.
    pub other: f64,
    /// Process start to the moment the report is serialised.
    pub total: f64,
    /// The gauge links as the backend holds them, uploaded at construction (GPU only):
    /// bytes, and bytes over the wall time from the first staged chunk's layout to the
    /// last copy's completion (host layout and copies overlapped).
    pub links_upload_bytes: Option<u64>,
    pub links_upload_gbytes_per_second: Option<f64>,
    /// The timed steps inside the phases (`timed`), for finding where a phase went.
    pub steps: Vec<Step>,
}

/// What the backend's construction and tuning took (wall clock), for the time line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BackendWall {
    /// Constructing the backend (GPU: context, compile, allocation, links).
    pub construct: f64,
    pub tune: f64,
    /// GPU only: link bytes uploaded and the staged upload's wall seconds.
    pub links: Option<(u64, f64)>,
}

impl TimeLine {
    /// Close the line: the total so far and the part no phase names.
    pub fn finish(&mut self, total: f64) {
        self.total = total;
        self.steps = steps();
        let named = self.read_generate
            + self.upload
            + self.tune
            + self.setup
            + self.solve
            + self.verify
            + self.write;
        self.other = (total - named).max(0.0);
    }

    /// The summary's line: "total 9.87 s: read/generate 1.23 s, upload ..., other ...".
    pub fn describe(&self) -> String {
        let mut s = format!(
            "total {:.3} s: read/generate {:.3} s, upload {:.3} s",
            self.total, self.read_generate, self.upload
        );
        if let (Some(b), Some(r)) = (self.links_upload_bytes, self.links_upload_gbytes_per_second) {
            s.push_str(&format!(" (links {:.2} GB at {r:.1} GB/s)", b as f64 / 1e9));
        }
        s.push_str(&format!(", tune {:.3} s", self.tune));
        if self.setup > 0.0 {
            s.push_str(&format!(", multigrid set-up {:.3} s", self.setup));
        }
        s.push_str(&format!(
            ", solve {:.3} s, verify {:.3} s, write {:.3} s, other {:.3} s",
            self.solve, self.verify, self.write, self.other
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_is_what_the_phases_leave_of_the_total() {
        let mut t = TimeLine {
            read_generate: 1.0,
            upload: 0.5,
            tune: 0.25,
            solve: 2.0,
            verify: 0.125,
            write: 0.0625,
            ..Default::default()
        };
        t.finish(4.0);
        // 4 - (1 + 0.5 + 0.25 + 2 + 0.125 + 0.0625) = 0.0625, exact in binary.
        assert_eq!(t.other, 0.0625);
        let line = t.describe();
        assert!(
            line.starts_with("total 4.000 s: read/generate 1.000 s, upload 0.500 s, tune 0.250 s"),
            "{line}"
        );
        assert!(
            line.contains("solve 2.000 s, verify 0.125 s, write "),
            "{line}"
        );
        assert!(line.contains(", other "), "{line}");
        t.links_upload_bytes = Some(4_000_000_000);
        t.links_upload_gbytes_per_second = Some(40.0);
        assert!(t
            .describe()
            .contains("upload 0.500 s (links 4.00 GB at 40.0 GB/s)"));
    }
}
