//! The GPU warm-up: a context, the kernels' compiles and the pinned staging buffers
//! started on background threads while the host builds the problem.

use crate::backend::cuda::core::compile::{self, Program};
use crate::backend::cuda::core::device::{arch_of, open_context, require_driver};

/// Start, on background threads, what the first GPU backend of this process will need:
/// GPU `ordinal`'s context (kept, see `retain`), the PTX of `programs` (the in-process
/// cache of `compile::compile`) and the pinned staging buffers of `pins` ((f64 per buffer,
/// buffers), `staging::prepin_all`, kept for the process), so that all three overlap the
/// host's work before the backend is built (reading or generating the gauge field). Failures are only
/// logged here: the backend's own construction meets and reports them. Join the handle
/// before timing the construction. The pinning is not joined: it holds the pinned pool's
/// lock, so the first transfer waits for it rather than pinning its own.
pub(crate) fn warm_up(
    ordinal: usize,
    programs: Vec<Program>,
    pins: Vec<(usize, usize)>,
) -> Option<std::thread::JoinHandle<()>> {
    require_driver().ok()?;
    let spawned = std::thread::Builder::new()
        .name("gpu warm-up".into())
        .spawn(move || {
            crate::clock::timed("GPU warm-up (in the background)", || {
                warm_up_now(ordinal, programs, pins)
            })
        });
    spawned.ok()
}

fn warm_up_now(ordinal: usize, programs: Vec<Program>, pins: Vec<(usize, usize)>) {
    let ctx = match open_context(ordinal) {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("GPU warm-up: {e}");
            return;
        }
    };
    let arch = match arch_of(&ctx) {
        Ok(a) => a,
        Err(e) => {
            tracing::debug!("GPU warm-up: {e}");
            return;
        }
    };
    let pinning = {
        let ctx = ctx.clone();
        std::thread::Builder::new()
            .name("gpu staging pin".into())
            .spawn(move || {
                crate::clock::timed("pin the staging buffers (in the background)", || {
                    if let Err(e) = crate::backend::cuda::core::staging::prepin_all(&ctx, &pins) {
                        tracing::debug!("GPU warm-up: {e}");
                    }
                })
            })
    };
    if let Err(e) = pinning {
        tracing::debug!("GPU warm-up: no thread to pin the staging buffers: {e}");
    }
    let threads: Vec<_> = programs
        .into_iter()
        .map(|p| {
            let arch = arch.clone();
            std::thread::spawn(move || {
                if let Err(e) = compile::compile(&p, &arch) {
                    tracing::debug!("GPU warm-up: {e}");
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}
