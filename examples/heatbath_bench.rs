//! Speed of the CPU gauge generator: compound sweeps (1 heatbath + 4 overrelaxation
//! passes + reunitarisation) per second and link updates per second at 8^4 and 16^3x32.
//!
//! `cargo run --release --example heatbath_bench [sweeps]` (default 5 timed sweeps per
//! lattice after 1 untimed warm-up sweep; best and median reported, since a shared machine
//! is noisy; RAYON_NUM_THREADS sets the thread count).
//! "Link updates" counts 4V per pass, so one compound sweep is 5 x 4V link updates;
//! "links per second" counts 4V per compound sweep.

use qcd_solve::gauge_gen::{Generator, HeatbathParams};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};

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
        let mut times: Vec<f64> = (0..timed).map(|_| g.sweep().update_seconds).collect();
        times.sort_by(f64::total_cmp);
        let (best, median) = (times[0], times[times.len() / 2]);
        let links = 4.0 * lattice.volume() as f64;
        println!(
            "{:>11}: best {:.4} s/sweep, median {:.4} s/sweep (update only) -> best {:.3e} \
             link updates/s (HB or OR visits), {:.3e} links/s (compound sweeps); plaquette {:.6}",
            lattice.dims_string(),
            best,
            median,
            5.0 * links / best,
            links / best,
            g.field().plaquette().total
        );
    }
}
