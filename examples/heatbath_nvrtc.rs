//! Compiles kernels/heatbath.cu with NVRTC for sm_90 (--fmad=false, as the CPU/GPU
//! agreement needs) and lists the entry points found in the PTX. Needs libnvrtc.so.13:
//!
//! ```text
//! pip install --target .nvrtc nvidia-cuda-nvrtc==13.0.88
//! LD_LIBRARY_PATH=$PWD/.nvrtc/nvidia/cu13/lib cargo run --release --example heatbath_nvrtc
//! ```

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

fn main() {
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("libnvrtc not found: set LD_LIBRARY_PATH to the folder holding libnvrtc.so.13");
        std::process::exit(5);
    }
    let src = include_str!("../kernels/heatbath.cu");
    for fmad in [false, true] {
        let opts = CompileOptions {
            arch: Some("sm_90"),
            fmad: Some(fmad),
            name: Some("heatbath.cu".into()),
            // Its #include "su3.cuh".
            include_paths: vec![concat!(env!("CARGO_MANIFEST_DIR"), "/kernels").into()],
            ..Default::default()
        };
        let t = std::time::Instant::now();
        match compile_ptx_with_opts(src, opts) {
            Ok(ptx) => {
                let text = ptx.to_src();
                let entries: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.split(".entry ").nth(1))
                    .map(|s| s.trim_end_matches('('))
                    .collect();
                println!(
                    "sm_90 --fmad={fmad}: OK in {:.2} s, {} bytes of PTX, entries {:?}",
                    t.elapsed().as_secs_f64(),
                    text.len(),
                    entries
                );
            }
            Err(e) => {
                eprintln!("sm_90 --fmad={fmad}: NVRTC failed: {e:?}");
                std::process::exit(5);
            }
        }
    }
}
