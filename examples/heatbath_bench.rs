//! Speed of the CPU gauge generator: compound sweeps (1 heatbath + 4 overrelaxation
//! passes + reunitarisation) per second and link updates per second at 8^4 and 16^3x32.
//!
//! `cargo run --release --example heatbath_bench [sweeps]` (default 5 timed sweeps per
//! lattice after 1 untimed warm-up sweep; RAYON_NUM_THREADS sets the thread count).
//! "Link updates" counts 4V per pass, so one compound sweep is 5 x 4V link updates;
//! "links per second" counts 4V per compound sweep.

use qcd_solve::gauge_gen::{Generator, HeatbathParams};
use qcd_solve::lattice::{Lattice, DEFAULT_BOUNDARY};

fn main() {
    let timed: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("sweeps must be an integer"))
        .unwrap_or(5);
    println!(
        "threads {}, beta 6.0, hot start, 1 heatbath + 4 overrelaxation passes per sweep",
        rayon::current_num_threads()
    );
    for dims in [[8, 8, 8, 8], [16, 16, 16, 32]] {
        let lattice = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
        let params = HeatbathParams {
            hot_start: true,
            overrelax: 4,
            ..Default::default()
        };
        let mut g = Generator::new(&lattice, &params).unwrap();
        g.sweep(); // warm-up
        let mut update = 0.0;
        let mut total = 0.0;
        for _ in 0..timed {
            let r = g.sweep();
            update += r.update_seconds;
            total = r.elapsed_seconds;
        }
        let links = 4.0 * lattice.volume() as f64;
        let per_sweep = update / timed as f64;
        println!(
            "{:>10}: {:8.4} s/sweep (update only; {:.4} s with plaquette), {:.3e} link updates/s \
             (HB or OR visit), {:.3e} links/s (compound sweep); plaquette {:.6}",
            lattice.dims_string(),
            per_sweep,
            total / (timed + 1) as f64,
            5.0 * links / per_sweep,
            links / per_sweep,
            g.field().plaquette().total
        );
    }
}
