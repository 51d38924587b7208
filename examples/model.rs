//! The multi-GPU model's table (README "Multi-GPU", `report::model`) from the times
//! measured on one GPU. Usage (times in microseconds per application, at the local volume
//! LX,LY,LZ,LT the measurement was taken at):
//!   cargo run --release --example model -- LX,LY,LZ,LT DSLASH INTERIOR PACK EXTERIOR ITERATION FACE
//! (FACE: sites of the face PACK and EXTERIOR were measured on), e.g. runs 21-22 (H100,
//! double r18): 32,32,32,64 1123.55 1123.55 28.2 34.9 2841.69 32768

use qcd_solve::report::model::{self, Measured, INFINIBAND, NVLINK};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 7 {
        eprintln!(
            "usage: model LX,LY,LZ,LT DSLASH INTERIOR PACK EXTERIOR ITERATION (us) FACE (sites)"
        );
        std::process::exit(2);
    }
    let local: Vec<usize> = a[0]
        .split(',')
        .map(|v| v.parse().expect("extent"))
        .collect();
    let us = |i: usize| a[i].parse::<f64>().expect("a time in us") * 1e-6;
    let local: [usize; 4] = local.try_into().expect("4 extents");
    let m = Measured {
        local,
        dslash: us(1),
        interior: us(2),
        pack_per_dir: us(3),
        ref_face_sites: a[6].parse().expect("face sites"),
        exterior_per_dir: us(4),
        iteration: us(5),
        applications: 1.0,
        reductions: 2.0,
        face_bytes_per_site: 96.0,
        half_lattice: false,
    };
    println!("weak scaling, {}x{}x{}x{} per GPU, CR (1 stencil application, 2 reductions per iteration), double", local[0], local[1], local[2], local[3]);
    println!(
        "8 GPUs per node over {}; nodes over {}",
        NVLINK.name, INFINIBAND.name
    );
    print!(
        "{}",
        model::format_table(&model::weak_scaling_table(&m, local, NVLINK, INFINIBAND))
    );
}
