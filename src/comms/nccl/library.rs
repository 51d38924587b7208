//! Loading NCCL: the libraries' checks, the version, the unique id, the process's NCCL
//! defaults, and NCCL's and the driver's failures as `Error`s.

use crate::{Error, Result};
use cudarc::driver::{sys as dsys, DriverError};
use cudarc::nccl::{result as nres, sys as nsys};
use std::ffi::CStr;

/// The size of NCCL's unique id (ncclUniqueId).
pub const ID_BYTES: usize = 128;

/// NCCL settings qcd-solve's process sets when the environment has not:
/// `NCCL_GRAPH_MIXING_SUPPORT=0`. Its default (1) lets operations captured in CUDA graphs
/// run alongside NCCL calls outside graphs, at a cost to every captured operation. Here a
/// rank's NCCL work never overlaps: the graphs' exchanges and all-gathers, and the
/// uncaptured ones of the reliable updates and of the reductions' sums, follow each other
/// through the rank's streams and events, and each host read of a sum waits for them.
/// Measured on 2 and 4 H200s (validate/RESULTS.md): the fused CR's graphs
/// 1.2-2.8% faster.
/// Set it to 1 to restore NCCL's default. Call before any thread starts (main does), as it
/// writes the environment.
pub const NCCL_DEFAULTS: &[(&str, &str)] = &[("NCCL_GRAPH_MIXING_SUPPORT", "0")];

pub fn set_process_defaults() {
    set_unset(NCCL_DEFAULTS);
}

/// Set each variable of `pairs` that the environment does not have.
fn set_unset(pairs: &[(&str, &str)]) {
    for (k, v) in pairs {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    }
}

/// libcuda and libnccl must be loadable before cudarc touches them (it panics otherwise).
pub fn require_nccl() -> Result<()> {
    // SAFETY: only tries to dlopen the libraries by their usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::Cuda(
            "libcuda not found: no NVIDIA driver on this machine (libcuda.so must be on the \
             loader path); NCCL needs a GPU"
                .into(),
        ));
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Err(Error::Cuda(
            "libnccl not found: it is loaded as libnccl.so (or libnccl.so.13, .12, .11, .10, \
             .9, .1), but NCCL installs libnccl.so.2 (pip's nvidia-nccl-cu13 under \
             site-packages/nvidia/nccl/lib or nvidia/cu13/lib, apt's libnccl2): put a link \
             named libnccl.so to it in a directory on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    Ok(())
}

/// The loaded NCCL's version, "2.27.7".
pub fn nccl_version() -> Result<String> {
    let (major, minor, patch) = version_numbers()?;
    Ok(format!("{major}.{minor}.{patch}"))
}

fn version_numbers() -> Result<(i32, i32, i32)> {
    require_nccl()?;
    let code = nres::get_nccl_version().map_err(|e| nccl_err("ncclGetVersion", e))?;
    // NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before.
    Ok(if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    })
}

/// A fresh NCCL unique id (rank 0 makes it; it also starts NCCL's bootstrap listener).
pub fn new_unique_id() -> Result<[u8; ID_BYTES]> {
    require_nccl()?;
    let id = nres::get_uniqueid().map_err(|e| nccl_err("ncclGetUniqueId", e))?;
    Ok(id.internal.map(|c| c as u8))
}

/// An NCCL failure as `Error::Cuda`, with NCCL's name for it and its last message.
pub(super) fn nccl_err(what: &str, e: nres::NcclError) -> Error {
    // SAFETY: ncclGetErrorString returns a static string for any result code.
    let name = unsafe { CStr::from_ptr(nsys::ncclGetErrorString(e.0)) }
        .to_string_lossy()
        .into_owned();
    // ncclGetLastError (NCCL >= 2.13) says why; with no communicator, this thread's last.
    // (Not version_numbers: that reports its own failure through here.)
    let last = match nres::get_nccl_version() {
        Ok(code) if code >= 21300 => {
            // SAFETY: a null communicator is allowed; the string is NCCL's, copied at once.
            let p = unsafe { nsys::ncclGetLastError(std::ptr::null_mut()) };
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: non-null, NUL-terminated, owned by NCCL.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        }
        _ => String::new(),
    };
    let last = if last.trim().is_empty() {
        " (NCCL_DEBUG=WARN prints NCCL's reason)".to_string()
    } else {
        format!(": {}", last.trim())
    };
    Error::Cuda(format!("{what}: {:?} {name}{last}", e.0))
}

pub(super) fn driver_err(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        if e.0 == dsys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::DeviceMemory(format!("{what}: {e}"))
        } else {
            Error::Cuda(format!("{what}: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_what_the_environment_leaves_unset() {
        // Names of this test's own, so that no other test reads them.
        let (set, unset) = ("NCCL_DEFAULTS_TEST_SET", "NCCL_DEFAULTS_TEST_UNSET");
        std::env::set_var(set, "1");
        std::env::remove_var(unset);
        set_unset(&[(set, "0"), (unset, "0")]);
        assert_eq!(
            std::env::var(set).unwrap(),
            "1",
            "a value the user set is kept"
        );
        assert_eq!(
            std::env::var(unset).unwrap(),
            "0",
            "an unset one gets the default"
        );
    }

    #[test]
    fn the_process_defaults_turn_graph_mixing_off_unless_set() {
        // What main calls before any thread starts. Only this test touches the variable
        // in this test binary (the NCCL tests are GPU targets of their own).
        let name = "NCCL_GRAPH_MIXING_SUPPORT";
        let before = std::env::var_os(name);
        std::env::remove_var(name);
        set_process_defaults();
        let unset = std::env::var(name);
        std::env::set_var(name, "1");
        set_process_defaults();
        let set = std::env::var(name);
        match before {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        }
        assert_eq!(unset.as_deref(), Ok("0"), "unset: graph mixing off");
        assert_eq!(set.as_deref(), Ok("1"), "the user's value is kept");
    }
}
