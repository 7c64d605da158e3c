//! Everything that knows Flink's REST API: wire models, their conversion, the HTTP client and
//! the reading of thread dumps and flame graphs.

pub mod client;
pub mod convert;
pub mod dto;
pub mod metrics;
pub mod threads;
