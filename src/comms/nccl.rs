//! NCCL (placeholder).
