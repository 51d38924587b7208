//! The program's errors. Each variant maps to one documented exit code (README, "Exit codes").

use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config file that does not parse, has an unknown key or a wrong type.
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },

    /// A value that parses but is impossible (kappa <= 0, odd dims for even-odd, ...).
    #[error("invalid value for `{key}`: {message}")]
    InvalidValue { key: String, message: String },

    /// A file that cannot be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    /// A gauge or source file whose content is malformed or disagrees with itself
    /// (truncated, bad header, checksum or plaquette mismatch).
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },

    /// No usable GPU, driver, or NVRTC where one was required, or a CUDA failure.
    #[error("CUDA: {0}")]
    Cuda(String),

    /// The problem does not fit in device memory.
    #[error("out of device memory: {0}")]
    DeviceMemory(String),

    /// The problem does not fit in the host memory this process may use (estimated before
    /// allocating; same exit code as device memory).
    #[error("out of host memory: {0}")]
    HostMemory(String),

    /// The solver stopped without reaching the tolerance (max iterations, stagnation,
    /// divergence, NaN).
    #[error("solver did not converge: {0}")]
    NotConverged(String),

    /// A validation or benchmark check failed.
    #[error("check failed: {0}")]
    CheckFailed(String),

    /// An internal invariant did not hold (fields of different layouts handed to one
    /// operation, an operator used outside its domain): a bug, not bad input.
    #[error("internal error (please report): {0}")]
    Internal(String),
}

impl Error {
    /// The process exit code for this error (documented in README.md).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config { .. } | Error::InvalidValue { .. } => 2,
            Error::Io { .. } => 3,
            Error::Format { .. } => 4,
            Error::Cuda(_) => 5,
            Error::DeviceMemory(_) | Error::HostMemory(_) => 6,
            Error::NotConverged(_) => 7,
            Error::CheckFailed(_) => 8,
            Error::Internal(_) => 9,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }

    /// The message of a bad value without its key (to be re-keyed where the caller knows
    /// which config key or flag set it); any other error as it displays.
    pub fn value_message(self) -> String {
        match self {
            Error::InvalidValue { message, .. } => message,
            other => other.to_string(),
        }
    }

    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidValue {
            key: key.into(),
            message: message.into(),
        }
    }
}
