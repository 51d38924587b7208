//! The device-memory ledger: every allocation a backend makes is booked here, by purpose,
//! for as long as it lives (a `Booking` travels with the allocation and takes itself off
//! the books when dropped). The books say what is held now, and what was held at the peak
//! (the largest total so far, with its parts), so that a run can print what it holds
//! ("links double r12: 12884901888 B, fields even single: ...") and tests can set the
//! estimate made before allocating (`app::footprint`) beside what was really allocated.
//!
//! Sizes are the bytes asked of the allocator; its granularity (2 MiB pages, pools) comes
//! on top and is the slack of the GPU test that sets the books beside the device's free
//! memory. `Measurement` (the triad of the GPU report, a fixed 768 MiB taken after the
//! solve) is held and listed but kept out of the peak, which is the solve's.

use crate::linalg::{Layout, Precision, Subset};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// What an allocation is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// The canonical gauge field on the device while a seed version (1.0-2.0) builds its
    /// links from it, or one chunk of its sites while 3.0 lays its links out on the
    /// device (`LinkUpload`); freed at the end of the set-up.
    GaugeUpload,
    /// The stencil's links: their precision, reals stored per link (18, or 12 or 8 with
    /// compression) and links per site (3.0: 4; the seed's doubled buffer: 8).
    Links {
        precision: Precision,
        reals: u8,
        per_site: u8,
    },
    /// The clover term's device arrays (the clover part and the inverse's factor, 72
    /// reals a site each) in one precision.
    CloverTerm(Precision),
    /// The seed's displacement table (bufMove, 1.0-1.3; one word otherwise).
    MoveTable,
    /// Version 2.0's per-product temporaries (tmp1, tmp2).
    StencilTemporaries,
    /// 3.0's odd half-field temporary of the Schur operator (one buffer for both
    /// precisions).
    SchurTemporary,
    /// The partial sums of the multi-pass reductions (dot, norm2).
    Reductions,
    /// Spinor fields of one layout (the solver's and the application's).
    Fields(Layout),
    /// A fused CR solve's device scalars, history, partial sums and tickets.
    CrState,
    /// A decomposed lattice's face buffers and ghost links.
    Halo,
    /// Multigrid's levels on the device: the coarse operators, the prolongators and the
    /// coarse fields.
    Multigrid,
    /// The triad of the GPU report (not part of the peak).
    Measurement,
}

impl Purpose {
    /// Order of the books' lines: links first, fields last.
    fn rank(&self) -> (u8, u8, u8, u8) {
        let prec = |p: Precision| match p {
            Precision::Double => 0,
            Precision::Single => 1,
            Precision::Half => 2,
        };
        match *self {
            Purpose::GaugeUpload => (0, 0, 0, 0),
            Purpose::Links {
                precision,
                reals,
                per_site,
            } => (1, prec(precision), reals, per_site),
            Purpose::CloverTerm(p) => (1, prec(p), 100, 0),
            Purpose::MoveTable => (2, 0, 0, 0),
            Purpose::StencilTemporaries => (3, 0, 0, 0),
            Purpose::SchurTemporary => (4, 0, 0, 0),
            Purpose::Reductions => (5, 0, 0, 0),
            Purpose::Halo => (6, 0, 0, 0),
            Purpose::CrState => (7, 0, 0, 0),
            Purpose::Multigrid => (7, 1, 0, 0),
            Purpose::Fields(l) => {
                let s = match l.subset {
                    Subset::Full => 0,
                    Subset::Even => 1,
                    Subset::Odd => 2,
                };
                (8, s, prec(l.precision), 0)
            }
            Purpose::Measurement => (9, 0, 0, 0),
        }
    }

    /// "links double r12", "fields even single".
    pub fn label(&self) -> String {
        let prec = |p: Precision| p.name();
        match *self {
            Purpose::GaugeUpload => "gauge field (set-up copy)".into(),
            Purpose::Links {
                precision,
                reals,
                per_site,
            } => {
                let mut s = format!("links {} r{reals}", prec(precision));
                if per_site != 4 {
                    s.push_str(&format!(" ({per_site} per site)"));
                }
                s
            }
            Purpose::CloverTerm(p) => format!("clover term {}", prec(p)),
            Purpose::MoveTable => "displacement table".into(),
            Purpose::StencilTemporaries => "stencil temporaries".into(),
            Purpose::SchurTemporary => "Schur temporary".into(),
            Purpose::Reductions => "reduction partials".into(),
            Purpose::Fields(l) => {
                let sub = match l.subset {
                    Subset::Full => "full",
                    Subset::Even => "even",
                    Subset::Odd => "odd",
                };
                format!("fields {sub} {}", prec(l.precision))
            }
            Purpose::CrState => "fused CR state".into(),
            Purpose::Halo => "halo faces and ghost links".into(),
            Purpose::Multigrid => "multigrid levels".into(),
            Purpose::Measurement => "triad measurement".into(),
        }
    }
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

impl Serialize for Purpose {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// Bytes of a spinor field of `layout` on a lattice of `volume` sites as the GPU stores it:
/// 12 complex numbers per site of the layout's subset, 16 bytes each in double, 8 in single;
/// in half 24 16-bit integers and an f32 norm per site (52 bytes, `linalg::half`).
pub fn field_bytes(layout: Layout, volume: usize) -> u64 {
    let site = match layout.precision {
        Precision::Double => 12 * 16,
        Precision::Single => 12 * 8,
        Precision::Half => crate::linalg::half::SITE_BYTES,
    };
    layout.subset.sites(volume) as u64 * site
}

/// One purpose's allocations: how many, and their bytes together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryLine {
    pub purpose: Purpose,
    pub count: usize,
    pub bytes: u64,
}

/// Lines in the books' order, empty purposes left out.
pub fn sorted_lines(lines: impl IntoIterator<Item = MemoryLine>) -> Vec<MemoryLine> {
    let mut merged: HashMap<Purpose, MemoryLine> = HashMap::new();
    for l in lines {
        let e = merged.entry(l.purpose).or_insert(MemoryLine {
            purpose: l.purpose,
            count: 0,
            bytes: 0,
        });
        e.count += l.count;
        e.bytes += l.bytes;
    }
    let mut v: Vec<MemoryLine> = merged.into_values().filter(|l| l.count > 0).collect();
    v.sort_by_key(|l| l.purpose.rank());
    v
}

/// "links double r12 1.21 GiB, fields even single 5 x 48.0 MiB, ...".
pub fn describe_lines(lines: &[MemoryLine]) -> String {
    lines
        .iter()
        .map(|l| {
            if l.count > 1 {
                format!(
                    "{} {} x {}",
                    l.purpose,
                    l.count,
                    human_bytes(l.bytes / l.count as u64)
                )
            } else {
                format!("{} {}", l.purpose, human_bytes(l.bytes))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// "1.21 GiB", "48.0 MiB", "512 B".
pub fn human_bytes(b: u64) -> String {
    const KIB: f64 = 1024.0;
    let x = b as f64;
    if x >= KIB * KIB * KIB {
        format!("{:.2} GiB", x / (KIB * KIB * KIB))
    } else if x >= KIB * KIB {
        format!("{:.1} MiB", x / (KIB * KIB))
    } else if x >= KIB {
        format!("{:.1} KiB", x / KIB)
    } else {
        format!("{b} B")
    }
}

/// A snapshot of the books.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryBooks {
    /// What is held now.
    pub held: Vec<MemoryLine>,
    pub held_bytes: u64,
    /// The largest total held so far (without `Measurement`), and its parts then.
    pub peak_bytes: u64,
    pub at_peak: Vec<MemoryLine>,
}

#[derive(Default)]
struct Books {
    held: HashMap<Purpose, (usize, u64)>,
    /// Held bytes without `Measurement`.
    total: u64,
    peak: u64,
    at_peak: Vec<MemoryLine>,
}

impl Books {
    fn lines(&self) -> Vec<MemoryLine> {
        sorted_lines(
            self.held
                .iter()
                .map(|(&purpose, &(count, bytes))| MemoryLine {
                    purpose,
                    count,
                    bytes,
                }),
        )
    }

    /// One allocation of `bytes` booked (`grow`) or freed.
    fn add(&mut self, purpose: Purpose, bytes: u64, grow: bool) {
        let e = self.held.entry(purpose).or_insert((0, 0));
        if grow {
            e.0 += 1;
            e.1 += bytes;
        } else {
            e.0 -= 1;
            e.1 -= bytes;
        }
        if e.0 == 0 {
            self.held.remove(&purpose);
        }
        if purpose == Purpose::Measurement {
            return;
        }
        if grow {
            self.total += bytes;
            if self.total > self.peak {
                self.peak = self.total;
                self.at_peak = self
                    .lines()
                    .into_iter()
                    .filter(|l| l.purpose != Purpose::Measurement)
                    .collect();
            }
        } else {
            self.total -= bytes;
        }
    }
}

/// The books of one backend, shared by the bookings of its allocations.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<Books>>);

fn lock(m: &Mutex<Books>) -> MutexGuard<'_, Books> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ledger {
    pub fn new() -> Self {
        Ledger::default()
    }

    /// Book `bytes` for `purpose` (one allocation) until the booking is dropped.
    pub fn book(&self, purpose: Purpose, bytes: u64) -> Booking {
        lock(&self.0).add(purpose, bytes, true);
        Booking {
            books: self.0.clone(),
            purpose,
            bytes,
        }
    }

    pub fn books(&self) -> MemoryBooks {
        let b = lock(&self.0);
        let held = b.lines();
        MemoryBooks {
            held_bytes: held.iter().map(|l| l.bytes).sum(),
            held,
            peak_bytes: b.peak,
            at_peak: b.at_peak.clone(),
        }
    }

    /// Start a new peak from what is held now.
    pub fn reset_peak(&self) {
        let mut b = lock(&self.0);
        b.peak = b.total;
        b.at_peak = b
            .lines()
            .into_iter()
            .filter(|l| l.purpose != Purpose::Measurement)
            .collect();
    }
}

/// One allocation on the books; dropping it (with the allocation it travels with) takes
/// it off.
pub struct Booking {
    books: Arc<Mutex<Books>>,
    purpose: Purpose,
    bytes: u64,
}

impl Booking {
    pub fn purpose(&self) -> Purpose {
        self.purpose
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Booking {
    fn drop(&mut self) {
        lock(&self.books).add(self.purpose, self.bytes, false);
    }
}

impl std::fmt::Debug for Booking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Booking({}, {} B)", self.purpose, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVEN_SINGLE: Layout = Layout {
        subset: Subset::Even,
        precision: Precision::Single,
    };

    #[test]
    fn field_bytes_per_site_by_layout() {
        // 12 complex per site of the subset: 192, 96 (full double / single) and 96, 48
        // (half double / single) bytes per site of the lattice.
        let v = 16;
        assert_eq!(field_bytes(Layout::FULL, v), 192 * 16);
        assert_eq!(
            field_bytes(Layout::FULL.with_precision(Precision::Single), v),
            96 * 16
        );
        assert_eq!(
            field_bytes(Layout::new(Subset::Odd, Precision::Double), v),
            96 * 16
        );
        assert_eq!(field_bytes(EVEN_SINGLE, v), 48 * 16);
    }

    #[test]
    fn the_books_follow_bookings_and_keep_the_peak_with_its_parts() {
        let l = Ledger::new();
        let links = l.book(
            Purpose::Links {
                precision: Precision::Double,
                reals: 12,
                per_site: 4,
            },
            384,
        );
        let a = l.book(Purpose::Fields(EVEN_SINGLE), 48);
        let b = l.book(Purpose::Fields(EVEN_SINGLE), 48);
        assert_eq!(l.books().held_bytes, 480);
        drop(a);
        let triad = l.book(Purpose::Measurement, 10_000);
        let books = l.books();
        assert_eq!(books.held_bytes, 432 + 10_000);
        // The measurement is held but not part of the peak.
        assert_eq!(books.peak_bytes, 480);
        assert_eq!(
            books.at_peak,
            vec![
                MemoryLine {
                    purpose: links.purpose(),
                    count: 1,
                    bytes: 384
                },
                MemoryLine {
                    purpose: Purpose::Fields(EVEN_SINGLE),
                    count: 2,
                    bytes: 96
                }
            ]
        );
        drop((b, triad));
        assert_eq!(l.books().held_bytes, 384);
        l.reset_peak();
        assert_eq!(l.books().peak_bytes, 384);
        drop(links);
        let books = l.books();
        assert!(books.held.is_empty());
        assert_eq!(books.held_bytes, 0);
        assert_eq!(
            describe_lines(&books.at_peak),
            "links double r12 384 B".to_string()
        );
    }

    #[test]
    fn labels_name_precision_compression_and_layout() {
        let seed = Purpose::Links {
            precision: Precision::Double,
            reals: 18,
            per_site: 8,
        };
        assert_eq!(seed.label(), "links double r18 (8 per site)");
        assert_eq!(Purpose::Fields(EVEN_SINGLE).label(), "fields even single");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
