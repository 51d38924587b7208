//! Fields on the host: SU(3) algebra, gamma matrices, gauge and spinor fields.

pub mod gamma;
pub mod gauge;
pub mod scatter;
pub mod spinor;
pub mod su3;

pub use gauge::GaugeField;
pub use spinor::SpinorField;
pub use su3::{Su3, C64};
