//! Choosing where to run: the GPU when one is usable, else the CPU (for `auto`).

use crate::config::Device;
use crate::Result;

/// Resolve `auto` (a GPU when one is usable, else the CPU with the reason logged) and
/// check that an explicit `cuda` can run.
pub fn choose_device(requested: Device) -> Result<Device> {
    match requested {
        Device::Cpu => Ok(Device::Cpu),
        Device::Cuda => {
            let info = crate::backend::cuda::device_info()?;
            tracing::info!(gpu = %info.name, "device = cuda");
            Ok(Device::Cuda)
        }
        Device::Auto => match crate::backend::cuda::device_info() {
            Ok(info) => {
                tracing::info!(gpu = %info.name, "device = auto: using the GPU");
                Ok(Device::Cuda)
            }
            Err(e) => {
                tracing::info!("device = auto: no usable GPU ({e}); running on the CPU");
                Ok(Device::Cpu)
            }
        },
    }
}
