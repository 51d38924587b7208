//! The `qcd-solve` command: parse the command line, set up logging, dispatch, and turn an
//! error into its message and documented exit code (README, "Exit codes").

use clap::Parser;
use qcd_solve::app::cli::{self, Cli};

fn main() {
    qcd_solve::report::timeline::mark_process_start();
    // Before any thread: it writes the environment NCCL reads.
    qcd_solve::comms::nccl::library::set_process_defaults();
    let cli = Cli::parse();
    cli::init_logging(cli.quiet, cli.verbose);
    qcd_solve::report::progress::set_line_interval(cli.progress_secs);
    // RAYON_NUM_THREADS is bounded like --threads before any pool is built.
    if let Err(e) = qcd_solve::threads::check_env().and_then(|()| cli::dispatch(cli)) {
        // Bounded: an error quoting a huge bad value stays readable.
        eprintln!("error: {}", qcd_solve::io::bounded_message(&e.to_string()));
        std::process::exit(e.exit_code());
    }
}
