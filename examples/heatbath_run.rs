//! A plain generator run for validation: prints every sweep's plaquette and the mean over
//! the measured part with its autocorrelation-aware error.
//!
//! `cargo run --release --example heatbath_run -- LX LY LZ LT BETA THERM SWEEPS SEED hot|cold [OR]`

use qcd_solve::gauge_gen::{generate, summarise, HeatbathParams};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 9 {
        eprintln!("usage: heatbath_run LX LY LZ LT BETA THERM SWEEPS SEED hot|cold [OVERRELAX]");
        std::process::exit(2);
    }
    let n = |i: usize| -> usize { a[i].parse().expect("integer argument") };
    let lattice = Lattice::new([n(0), n(1), n(2), n(3)], DEFAULT_BOUNDARY).unwrap();
    let params = HeatbathParams {
        beta: a[4].parse().expect("beta"),
        therm: n(5),
        sweeps: n(6),
        every: 1,
        seed: a[7].parse().expect("seed"),
        hot_start: a[8] == "hot",
        overrelax: if a.len() > 9 { n(9) } else { 4 },
    };
    println!(
        "# {} {:?} threads {}",
        lattice.dims_string(),
        params,
        rayon::current_num_threads()
    );
    println!("# sweep measured plaq_total plaq_spatial plaq_temporal update_s elapsed_s");
    let mut records = Vec::new();
    let field = generate(&lattice, &params, |r| {
        println!(
            "{} {} {:.12} {:.12} {:.12} {:.4} {:.2}",
            r.sweep,
            r.measured as u8,
            r.plaquette.total,
            r.plaquette.spatial,
            r.plaquette.temporal,
            r.update_seconds,
            r.elapsed_seconds
        );
        records.push(r);
    })
    .unwrap();
    println!(
        "# max unitarity deviation {:.3e}",
        field.max_unitarity_deviation()
    );
    if let Some(s) = summarise(&records) {
        for (name, e) in [
            ("total", s.total),
            ("spatial", s.spatial),
            ("temporal", s.temporal),
        ] {
            println!(
                "# plaquette {name}: {:.7} +- {:.7} (naive {:.7}), tau_int {:.2} +- {:.2}, window {}{}, N {}",
                e.mean,
                e.error,
                e.naive_error,
                e.tau_int,
                e.tau_int_error,
                e.window,
                if e.window_found { "" } else { " (NOT FOUND)" },
                e.n
            );
        }
    }
}
