//! Everything that knows Flink's REST API: wire models, their conversion, and the HTTP client.

pub mod client;
pub mod convert;
pub mod dto;
pub mod metrics;
