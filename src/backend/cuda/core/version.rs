//! The seed report's stencilCore versions (report 004, section IV.4; docs/stencil-versions.md)
//! as a plain enum with no CUDA dependency, so that a config can name one on a machine
//! without a GPU. For each version: what it is, its launch geometry, its shared memory,
//! and its own executed flops and global-memory bytes per site (next to the QUDA-style
//! model of conventions.md: 1320 flops, 2880 bytes per site). Version 3.0 is ours, not the
//! seed's: the spin-projected, fused, bandwidth-bound dslash of kernels/stencil_v3.cu.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// One historical stencil kernel version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StencilVersion {
    V1_0,
    V1_1,
    V1_2,
    V1_3,
    V1_4,
    V1_5,
    V1_6,
    V1_6_1,
    V2_0,
    V3_0,
}

/// Complex numbers per site of a spinor, and bytes of one complex double.
const SITE_COMPLEX: u64 = 12;
const COMPLEX_BYTES: u64 = 16;
/// Largest shared memory a block may use without opting in (the seed's 48 KB limit).
pub const SHARED_LIMIT_BYTES: usize = 48 * 1024;
/// Threads per block of the coarse-grain version 1.0 (the seed's choice).
pub const COARSE_BLOCK: usize = 256;
/// Largest `multiple`: 12 * multiple threads must fit a block of 1024.
pub const MAX_MULTIPLE: usize = 85;
/// Largest block of version 3.0 (V3_MAX_BLOCK in kernels/stencil_v3.cu).
pub const V3_MAX_BLOCK: usize = 512;
/// Largest block of 3.0's full-mode entry point without the dot epilogue (`stencil_v3`,
/// V3_FULL_MAX_BLOCK in kernels/stencil_v3.cu): its launch bound leaves the double builds
/// the registers they want (146-166, no spill) where 512 held them to 128.
/// `stencil::v3::launch_block` clamps those launches to it (validate/RESULTS.md).
pub const V3_FULL_MAX_BLOCK: usize = 128;

/// Reals stored and read per gauge link by 3.0's link array (`[backend] reconstruct`):
/// the full 3x3 matrix, rows 0 and 1 (row 2 = conj(row0 x row1) rebuilt in registers), or
/// the 8-real form (U01, U02, U10 and the phases of U00 and U20, the rest rebuilt from
/// unitarity and det = 1: kernels/v3_core.cuh v3_unpack_8, `Su3::pack8`). The compressed
/// forms are exact to rounding for SU(3) links only; 3.0 only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reconstruct {
    #[default]
    R18,
    R12,
    R8,
}

impl Reconstruct {
    /// Every form, in the order the tables list them.
    pub const ALL: [Reconstruct; 3] = [Reconstruct::R18, Reconstruct::R12, Reconstruct::R8];

    /// The form storing `reals` reals per link (18, 12 or 8), if there is one.
    pub fn from_reals(reals: i64) -> Option<Reconstruct> {
        match reals {
            18 => Some(Reconstruct::R18),
            12 => Some(Reconstruct::R12),
            8 => Some(Reconstruct::R8),
            _ => None,
        }
    }

    /// Reals stored per link (R of conventions.md's byte counts).
    pub fn reals(self) -> usize {
        match self {
            Reconstruct::R18 => 18,
            Reconstruct::R12 => 12,
            Reconstruct::R8 => 8,
        }
    }

    /// Complex (real pairs) stored per link: 3.0's V3_LINK_ELEMS.
    pub fn elems(self) -> usize {
        self.reals() / 2
    }

    /// Whether the links are stored compressed (12 or 8 reals).
    pub fn compressed(self) -> bool {
        self != Reconstruct::R18
    }

    /// "r18", "r12" or "r8".
    pub fn label(self) -> &'static str {
        match self {
            Reconstruct::R18 => "r18",
            Reconstruct::R12 => "r12",
            Reconstruct::R8 => "r8",
        }
    }
}

impl fmt::Display for Reconstruct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reals())
    }
}

impl FromStr for Reconstruct {
    type Err = Error;

    /// "18", "12" or "8" (the command line's `--reconstruct`).
    fn from_str(s: &str) -> Result<Self> {
        s.trim()
            .parse::<i64>()
            .ok()
            .and_then(Reconstruct::from_reals)
            .ok_or_else(|| {
                Error::invalid(
                    "reconstruct",
                    format!("must be 18, 12 or 8 reals per link, got `{}`", s.trim()),
                )
            })
    }
}

/// A config's `reconstruct = 18 | 12 | 8`: the number of reals.
impl serde::Serialize for Reconstruct {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_i64(self.reals() as i64)
    }
}

impl<'de> serde::Deserialize<'de> for Reconstruct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        Reconstruct::from_reals(n).ok_or_else(|| {
            serde::de::Error::custom(format!("must be 18, 12 or 8 reals per link, got {n}"))
        })
    }
}

/// Where a version reads its links from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayout {
    /// The seed buffer: per site uup(t,x,y,z) then udn(t,x,y,z), 3x3 row-major.
    Seed,
    /// Version 1.6's rearrangement (pairs contiguous, transposed, interleaved by two).
    Reordered,
    /// Version 3.0: the canonical 4 links per site as a structure of arrays across sites
    /// (element (mu, row, col) of site s at (mu*9 + row*3 + col)*V + s); spinors too.
    SoA,
}

impl StencilVersion {
    pub fn all() -> &'static [StencilVersion] {
        use StencilVersion::*;
        &[V1_0, V1_1, V1_2, V1_3, V1_4, V1_5, V1_6, V1_6_1, V2_0, V3_0]
    }

    pub fn as_str(self) -> &'static str {
        use StencilVersion::*;
        match self {
            V1_0 => "1.0",
            V1_1 => "1.1",
            V1_2 => "1.2",
            V1_3 => "1.3",
            V1_4 => "1.4",
            V1_5 => "1.5",
            V1_6 => "1.6",
            V1_6_1 => "1.6.1",
            V2_0 => "2.0",
            V3_0 => "3.0",
        }
    }

    pub fn description(self) -> &'static str {
        use StencilVersion::*;
        match self {
            V1_0 => "coarse grain: one thread per site, blocks of 256, general 4x4 Li products from constant memory, bufMove table",
            V1_1 => "fine grain: 12 threads per site (one per element of the 3x4 result), one site per block of 16 (4 idle), tmp1/tmp2 in shared memory",
            V1_2 => "workgroup multiples: 1.1 with `multiple` sites per block of 12*multiple threads, no idle thread",
            V1_3 => "1.2 with hand-written products of the sparse Li (about half the flops)",
            V1_4 => "1.3 with neighbours computed from the coordinates (no bufMove table)",
            V1_5 => "1.4 with the products reordered (tmp1 double-buffered): 8 barriers instead of 16",
            V1_6 => "1.5 with U rearranged on the device (uup/udn pairs contiguous, transposed, columns interleaved by two) and staged in shared memory",
            V1_6_1 => "1.6 reading U from global memory (fits multiple = 64 under 48 KB)",
            V2_0 => "one kernel per product: xgemm34x44 then xgemm33x34 per hop, then the combine; 17 launches with global intermediate buffers (sparse Li, neighbours from coordinates, seed U layout)",
            V3_0 => "ours, bandwidth-bound: one thread per site, spin projection to half spinors (1368 flops fused), out = psi - kappa*hop and the g5 sign fused in the store, 4 links per site (backward hop applies U(x-mu)^+), parity-major structure-of-arrays layout (coalesced loads; even extents only), boundary phases from coordinates, block size = coarse_block; the fast path: even-odd fields and operators, single precision, fused (r|Ar)",
        }
    }

    /// Threads that work on one site (1.1 launches 16 per site, 4 of them idle).
    pub fn threads_per_site(self) -> usize {
        match self {
            StencilVersion::V1_0 | StencilVersion::V3_0 => 1,
            _ => 12,
        }
    }

    /// Whether the run parameter `multiple` (sites per block) applies.
    pub fn uses_multiple(self) -> bool {
        !matches!(
            self,
            StencilVersion::V1_0 | StencilVersion::V1_1 | StencilVersion::V3_0
        )
    }

    /// Whether the run parameter `coarse_block` (threads = sites per block of a
    /// one-thread-per-site kernel) applies: 1.0 and 3.0.
    pub fn uses_coarse_block(self) -> bool {
        self.threads_per_site() == 1
    }

    /// The largest `coarse_block` the version launches with (3.0 is compiled with
    /// __launch_bounds__(V3_MAX_BLOCK), which caps its registers per thread).
    pub fn max_coarse_block(self) -> usize {
        match self {
            StencilVersion::V3_0 => V3_MAX_BLOCK,
            // 1.0 keeps its private tmp arrays in registers: 1024 threads per block ask
            // for more registers than an SM has (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on an
            // H100, validate/RESULTS.md).
            StencilVersion::V1_0 => 512,
            _ => 1024,
        }
    }

    /// Our own fast path (3.0): even-odd fields, single precision and the fused CR.
    pub fn is_fast_path(self) -> bool {
        self == StencilVersion::V3_0
    }

    /// Whether the version reads links stored as `r`: 18 reals everywhere, the compressed
    /// forms (`reconstruct = 12` or `8`) in 3.0 only.
    pub fn supports_reconstruct(self, r: Reconstruct) -> bool {
        !r.compressed() || self == StencilVersion::V3_0
    }

    /// `r` where the version supports it, else 18 reals (a sweep over versions).
    pub fn reconstruct_or_18(self, r: Reconstruct) -> Reconstruct {
        if self.supports_reconstruct(r) {
            r
        } else {
            Reconstruct::R18
        }
    }

    /// Spin projection to half spinors (QUDA's 1320/1368 flop formulation): 3.0.
    pub fn spin_projected(self) -> bool {
        self == StencilVersion::V3_0
    }

    /// Hand-written sparse Li products (1.3 and later) instead of the general 4x4 product.
    pub fn sparse_li(self) -> bool {
        self >= StencilVersion::V1_3 && !self.spin_projected()
    }

    /// Neighbours read from the displacement table (1.0 to 1.3).
    pub fn uses_move_table(self) -> bool {
        self <= StencilVersion::V1_3
    }

    pub fn fewer_barriers(self) -> bool {
        matches!(
            self,
            StencilVersion::V1_5 | StencilVersion::V1_6 | StencilVersion::V1_6_1
        )
    }

    pub fn link_layout(self) -> LinkLayout {
        match self {
            StencilVersion::V1_6 | StencilVersion::V1_6_1 => LinkLayout::Reordered,
            StencilVersion::V3_0 => LinkLayout::SoA,
            _ => LinkLayout::Seed,
        }
    }

    pub fn links_in_shared(self) -> bool {
        self == StencilVersion::V1_6
    }

    /// Barriers executed per block and operator application (None: no barrier-synchronised
    /// kernel; 2.0 synchronises through its 17 launches).
    pub fn barriers(self) -> Option<u32> {
        use StencilVersion::*;
        match self {
            V1_0 | V2_0 | V3_0 => None,
            V1_1 | V1_2 | V1_3 | V1_4 => Some(16),
            V1_5 | V1_6_1 => Some(8),
            V1_6 => Some(9),
        }
    }

    /// Sites handled by one block.
    pub fn sites_per_block(self, multiple: usize) -> usize {
        match self {
            StencilVersion::V1_0 | StencilVersion::V3_0 => COARSE_BLOCK,
            StencilVersion::V1_1 => 1,
            _ => multiple,
        }
    }

    /// Threads per block of the stencil kernel(s).
    pub fn block_threads(self, multiple: usize) -> usize {
        match self {
            StencilVersion::V1_0 | StencilVersion::V3_0 => COARSE_BLOCK,
            StencilVersion::V1_1 => 16,
            _ => 12 * multiple,
        }
    }

    /// Complex tmp1 buffers per site in shared memory.
    fn tmp1_buffers(self) -> usize {
        if self.fewer_barriers() {
            2
        } else {
            1
        }
    }

    /// Dynamic shared memory of one stencil block, in bytes (mirrors stencil_fine.cu).
    pub fn shared_bytes(self, multiple: usize) -> usize {
        use StencilVersion::*;
        match self {
            V1_0 | V2_0 | V3_0 => 0,
            _ => {
                let spb = self.sites_per_block(multiple);
                let mut complex = spb * 12 * (self.tmp1_buffers() + 1);
                if self.links_in_shared() {
                    complex += 4 * (spb / 2 + 1) * 36;
                }
                complex * COMPLEX_BYTES as usize
            }
        }
    }

    /// Refuse a `multiple` the version cannot run with.
    pub fn check_multiple(self, multiple: usize) -> Result<()> {
        if !self.uses_multiple() {
            return Ok(());
        }
        if multiple == 0 || multiple > MAX_MULTIPLE {
            return Err(Error::invalid(
                "multiple",
                format!(
                    "version {self} uses 12 * multiple threads per block: multiple must be 1..={MAX_MULTIPLE}, got {multiple}"
                ),
            ));
        }
        let shared = self.shared_bytes(multiple);
        if shared > SHARED_LIMIT_BYTES {
            let hint = if self == StencilVersion::V1_6 {
                " (the seed's reason for version 1.6.1, which reads U from global memory)"
            } else {
                ""
            };
            return Err(Error::invalid(
                "multiple",
                format!(
                    "version {self} with multiple = {multiple} needs {shared} bytes of shared memory per block, over the {SHARED_LIMIT_BYTES}-byte limit{hint}"
                ),
            ));
        }
        Ok(())
    }

    /// Floating-point operations the version executes per site and operator application
    /// (its own count; the model count is 1320 for the hop term, 1368 fused).
    pub fn flops_per_site(self) -> u64 {
        if self.spin_projected() {
            // 8 x (12 projection + 2 x 66 mat-vec) + 7 x 24 accumulation + 48 fused output:
            // QUDA's fused count, executed as counted.
            return 1368;
        }
        // general xgemm34x44: 12 elements x (4 complex mul + 3 add) = 360
        // sparse xgemm34x44:  12 elements x 1 complex add = 24
        // xgemm33x34 accumulating: 12 x 3 complex multiply-adds = 288 (264 writing)
        // output psi - kappa tmp2: 12 x 4 = 48
        let spin = if self.sparse_li() { 24 } else { 360 };
        match self {
            StencilVersion::V2_0 => 8 * spin + 7 * 288 + 264 + 48,
            _ => 8 * (spin + 288) + 48,
        }
    }

    /// Global-memory bytes per site and operator application, each distinct datum a site
    /// needs counted once (no reuse between sites assumed).
    ///
    /// Exception, 3.0: the DRAM floor of conventions.md (4 links, psi and out once per
    /// site: 960 bytes in double, R = 18), because its structure-of-arrays layout lets the
    /// 8 neighbour spinors and the backward links come from cache; its GB/s against this
    /// count is the bandwidth the floor would need at the measured time.
    pub fn bytes_per_site(self) -> u64 {
        let spinor = SITE_COMPLEX * COMPLEX_BYTES; // 192
        let link = 9 * COMPLEX_BYTES; // 144
        if self.spin_projected() {
            return 4 * link + 2 * spinor;
        }
        match self {
            StencilVersion::V2_0 => {
                let gemm34 = 8 * 2 * spinor;
                let gemm33 = 8 * (link + spinor + spinor) + 7 * spinor;
                let combine = 3 * spinor;
                gemm34 + gemm33 + combine
            }
            _ => {
                let table = if self.uses_move_table() { 8 * 4 } else { 0 };
                8 * spinor + 8 * link + table + 2 * spinor
            }
        }
    }
}

impl fmt::Display for StencilVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StencilVersion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim();
        StencilVersion::all()
            .iter()
            .copied()
            .find(|v| v.as_str() == t)
            .ok_or_else(|| {
                let names: Vec<&str> = StencilVersion::all().iter().map(|v| v.as_str()).collect();
                Error::invalid(
                    "kernel",
                    format!(
                        "unknown stencil version `{t}`; expected one of {}",
                        names.join(", ")
                    ),
                )
            })
    }
}

impl serde::Serialize for StencilVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for StencilVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The link hints of 3.0's full mode without the dot (kernels/stencil_v3.cu
/// `V3_FULL_ENTRIES`), in the tuner's order: (entry-point suffix, the directions whose links
/// skip L1, named for the report). Index 0 is the default (`V3_FULL_STREAM_MASK`, the t
/// links unless a define changes it); "_l1all" keeps every link in L1, "_l1xy" only the x
/// and y links (mask 12).
pub(crate) const V3_LINK_HINTS: [(&str, &str); 3] =
    [("", "t"), ("_l1all", "none"), ("_l1xy", "z,t")];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &v in StencilVersion::all() {
            assert_eq!(v.to_string().parse::<StencilVersion>().unwrap(), v);
        }
        assert_eq!(StencilVersion::all().len(), 10);
        assert_eq!(
            "3.0".parse::<StencilVersion>().unwrap(),
            StencilVersion::V3_0
        );
        assert!("1.7".parse::<StencilVersion>().is_err());
        assert_eq!(
            " 1.6.1 ".parse::<StencilVersion>().unwrap(),
            StencilVersion::V1_6_1
        );
    }

    #[test]
    fn flop_counts_follow_the_products() {
        // 8 hops x (360 + 288) + 48 for the general Li product.
        assert_eq!(StencilVersion::V1_0.flops_per_site(), 5232);
        assert_eq!(StencilVersion::V1_2.flops_per_site(), 5232);
        // 8 x (24 + 288) + 48: "nearly half" (report 004, IV.4.E).
        assert_eq!(StencilVersion::V1_3.flops_per_site(), 2544);
        assert_eq!(StencilVersion::V1_6_1.flops_per_site(), 2544);
        assert_eq!(StencilVersion::V2_0.flops_per_site(), 2520);
        let ratio = 2544.0 / 5232.0;
        assert!(ratio > 0.45 && ratio < 0.5);
    }

    #[test]
    fn byte_counts() {
        // 8 neighbour spinors, 8 links, psi(x), out, and the 8-entry table.
        assert_eq!(
            StencilVersion::V1_0.bytes_per_site(),
            8 * 192 + 8 * 144 + 32 + 384
        );
        assert_eq!(StencilVersion::V1_4.bytes_per_site(), 3072);
        assert_eq!(StencilVersion::V2_0.bytes_per_site(), 9216);
        // 3.0: the DRAM floor, 4 links + psi + out.
        assert_eq!(StencilVersion::V3_0.bytes_per_site(), 960);
        assert_eq!(StencilVersion::V3_0.flops_per_site(), 1368);
        assert!(!StencilVersion::V3_0.uses_multiple());
        assert!(StencilVersion::V3_0.uses_coarse_block());
    }

    #[test]
    fn shared_memory_limit_matches_the_seed_story() {
        // 1.6 stages U in shared memory and cannot run multiple = 64 under 48 KB;
        // 1.6.1 can (report 004, IV.4.H).
        assert!(StencilVersion::V1_6.check_multiple(64).is_err());
        assert!(StencilVersion::V1_6_1.check_multiple(64).is_ok());
        assert!(StencilVersion::V1_6.check_multiple(16).is_ok());
        assert!(StencilVersion::V1_2.check_multiple(0).is_err());
        assert!(StencilVersion::V1_2.check_multiple(86).is_err());
        assert!(StencilVersion::V1_0.check_multiple(0).is_ok());
        assert_eq!(StencilVersion::V1_1.shared_bytes(64), 384);
    }
}
