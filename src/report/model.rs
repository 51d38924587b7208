//! The multi-GPU performance model (README "Multi-GPU"): the time of one solver
//! iteration on a decomposed lattice, predicted from times measured on ONE GPU (the
//! undecomposed iteration, and the decomposed operator's interior, exterior and face
//! packing) and the bandwidth and latency of the links between GPUs.
//!
//! Per stencil application of a rank whose sub-lattice is split in some directions:
//!   t_split = max(t_interior, t_pack + t_comm) + t_exterior
//! (the faces travel while the interior kernel runs), with
//!   t_comm = sum over split directions of 2 faces x face bytes / bandwidth + latency.
//! Per iteration: t_iter = t_iter,1 + applications x (t_split - t_dslash,1)
//!   + reductions x t_allreduce(ranks).
//!
//! Measured times are for a reference local volume; a prediction at another local volume
//! scales volume terms by the volume ratio and face terms by the face-area ratio.

use crate::geometry::lattice::NDIM;
use serde::Serialize;

/// What was measured on one GPU at `local` (per stencil application, seconds), for one
/// field precision.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub local: [usize; NDIM],
    /// The undecomposed operator on the local volume.
    pub dslash: f64,
    /// The interior kernel of the operator split in `split_dirs` directions.
    pub interior: f64,
    /// Face packing of one split direction (both faces), measured on faces of
    /// `ref_face_sites` sites.
    pub pack_per_dir: f64,
    pub ref_face_sites: f64,
    /// The exterior kernel of one split direction (both faces).
    pub exterior_per_dir: f64,
    /// One whole solver iteration, undecomposed (the fused CR on the fast path).
    pub iteration: f64,
    /// Stencil applications per iteration (2 for the Schur form: two hops).
    pub applications: f64,
    /// Global reductions per iteration that need a round trip (CR: 2).
    pub reductions: f64,
    /// Bytes per face site sent (12 reals x word size; half for a parity field's face).
    pub face_bytes_per_site: f64,
    /// Whether the stencil reads parity (half-lattice) fields: a face then holds half
    /// the sites of V/L_mu.
    pub half_lattice: bool,
}

/// A link between two GPUs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Link {
    pub name: &'static str,
    /// Bytes per second per direction.
    pub bandwidth: f64,
    /// Seconds per message.
    pub latency: f64,
}

pub const NVLINK: Link = Link {
    name: "NVLink (450 GB/s per direction)",
    bandwidth: 450e9,
    latency: 5e-6,
};

pub const INFINIBAND: Link = Link {
    name: "InfiniBand NDR (50 GB/s)",
    bandwidth: 50e9,
    latency: 10e-6,
};

/// One row of a prediction.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub gpus: usize,
    pub grid: [usize; NDIM],
    pub local: [usize; NDIM],
    pub t_comm: f64,
    pub t_split: f64,
    pub iteration: f64,
    /// Weak scaling: the one-GPU iteration at the same local volume over this one.
    pub efficiency: f64,
    /// Whether the faces' travel is hidden behind the interior.
    pub hidden: bool,
}

/// Predict the iteration at local volume `local`, split by `grid`, where directions in
/// `inter_node` (bit mu) cross nodes over `slow` and the others stay on `fast`.
pub fn predict(
    m: &Measured,
    local: [usize; NDIM],
    grid: [usize; NDIM],
    fast: Link,
    slow: Link,
    inter_node: u8,
) -> Prediction {
    let vol = |d: [usize; NDIM]| d.iter().product::<usize>() as f64;
    let face = |d: [usize; NDIM], mu: usize| vol(d) / d[mu] as f64;
    let v_ratio = vol(local) / vol(m.local);
    let split: Vec<usize> = (0..NDIM).filter(|&mu| grid[mu] > 1).collect();
    let dslash = m.dslash * v_ratio;
    let iteration1 = m.iteration * v_ratio;
    if split.is_empty() {
        return Prediction {
            gpus: 1,
            grid,
            local,
            t_comm: 0.0,
            t_split: dslash,
            iteration: iteration1,
            efficiency: 1.0,
            hidden: true,
        };
    }
    let parity = if m.half_lattice { 0.5 } else { 1.0 };
    let mut t_comm = 0.0;
    let mut pack = 0.0;
    let mut exterior = 0.0;
    for &mu in &split {
        let f_ratio = face(local, mu) / m.ref_face_sites;
        pack += m.pack_per_dir * f_ratio;
        exterior += m.exterior_per_dir * f_ratio;
        let link = if inter_node >> mu & 1 == 1 {
            slow
        } else {
            fast
        };
        let bytes = 2.0 * face(local, mu) * parity * m.face_bytes_per_site;
        t_comm += bytes / link.bandwidth + link.latency;
    }
    let interior = m.interior * v_ratio;
    let t_split = interior.max(pack + t_comm) + exterior;
    let gpus: usize = grid.iter().product();
    let slowest = if inter_node != 0 { slow } else { fast };
    // A reduction: an all-gather of a few doubles, log2(ranks) latencies deep.
    let allreduce = slowest.latency * (gpus as f64).log2().ceil();
    let iteration = iteration1 + m.applications * (t_split - dslash) + m.reductions * allreduce;
    Prediction {
        gpus,
        grid,
        local,
        t_comm,
        t_split,
        iteration,
        efficiency: iteration1 / iteration,
        hidden: interior >= pack + t_comm,
    }
}

/// The README's table: weak scaling at `local` per GPU on 2, 8, 64 and 512 GPUs (8 GPUs
/// per node over `fast`, nodes over `slow`), with grids that split t first, then z, y, x.
pub fn weak_scaling_table(
    m: &Measured,
    local: [usize; NDIM],
    fast: Link,
    slow: Link,
) -> Vec<Prediction> {
    [
        ([1, 1, 1, 1], 0u8),
        ([1, 1, 1, 2], 0),
        ([1, 1, 2, 4], 0),
        ([1, 2, 4, 8], 0b1000),
        ([4, 4, 4, 8], 0b1011),
    ]
    .into_iter()
    .map(|(grid, inter)| predict(m, local, grid, fast, slow, inter))
    .collect()
}

/// The table as text.
pub fn format_table(rows: &[Prediction]) -> String {
    let mut s = String::from(
        "  GPUs  grid         local           t_comm/us  t_dslash/us  t_iter/us  efficiency  hidden\n",
    );
    for r in rows {
        s += &format!(
            "  {:>4}  {:<11}  {:<14}  {:>9.1}  {:>11.1}  {:>9.1}  {:>9.1}%  {}\n",
            r.gpus,
            format!("{:?}", r.grid).replace(' ', ""),
            format!(
                "{}x{}x{}x{}",
                r.local[0], r.local[1], r.local[2], r.local[3]
            ),
            r.t_comm * 1e6,
            r.t_split * 1e6,
            r.iteration * 1e6,
            r.efficiency * 100.0,
            if r.hidden { "yes" } else { "no" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Measured {
        Measured {
            local: [32, 32, 32, 64],
            dslash: 100e-6,
            interior: 95e-6,
            pack_per_dir: 4e-6,
            ref_face_sites: 57344.0,
            exterior_per_dir: 6e-6,
            iteration: 300e-6,
            applications: 1.0,
            reductions: 2.0,
            face_bytes_per_site: 96.0,
            half_lattice: false,
        }
    }

    #[test]
    fn one_gpu_is_the_measurement_itself() {
        let p = predict(&m(), [32, 32, 32, 64], [1; 4], NVLINK, INFINIBAND, 0);
        assert_eq!((p.iteration, p.efficiency), (300e-6, 1.0));
    }

    #[test]
    fn a_t_split_costs_what_the_formula_says() {
        // Hand computation: t faces of 32^3 = 32768 sites; 2 faces x 32768 x 96 B =
        // 6.29 MB over 450 GB/s = 13.98 us + 5 us latency. pack 4 us measured on faces of
        // 57344 sites: factor 32768 / 57344 = 4/7.
        let p = predict(&m(), [32, 32, 32, 64], [1, 1, 1, 2], NVLINK, INFINIBAND, 0);
        let comm = 2.0 * 32768.0 * 96.0 / 450e9 + 5e-6;
        assert!((p.t_comm - comm).abs() < 1e-12, "{}", p.t_comm);
        let f = 32768.0 / 57344.0;
        let split = 95e-6f64.max(4e-6 * f + comm) + 6e-6 * f;
        assert!((p.t_split - split).abs() < 1e-12);
        let iter = 300e-6 + (split - 100e-6) + 2.0 * 5e-6;
        assert!((p.iteration - iter).abs() < 1e-12);
        assert!(p.hidden);
    }

    #[test]
    fn slow_links_cost_more_and_efficiency_falls_with_gpus() {
        let rows = weak_scaling_table(&m(), [32, 32, 32, 64], NVLINK, INFINIBAND);
        assert_eq!(
            rows.iter().map(|r| r.gpus).collect::<Vec<_>>(),
            [1, 2, 8, 64, 512]
        );
        for w in rows.windows(2) {
            assert!(w[1].efficiency <= w[0].efficiency + 1e-12, "{w:?}");
        }
        let fast = predict(&m(), [32, 32, 32, 64], [1, 1, 1, 2], NVLINK, INFINIBAND, 0);
        let slow = predict(
            &m(),
            [32, 32, 32, 64],
            [1, 1, 1, 2],
            NVLINK,
            INFINIBAND,
            0b1000,
        );
        assert!(slow.t_comm > 5.0 * fast.t_comm);
    }
}
