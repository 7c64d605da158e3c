//! Barrier alignment model (placeholder while the coordinator lands).
