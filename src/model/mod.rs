//! The reference model: what Flink *should* do, computed rather than observed.
//!
//! Pure like the rest of the core: no I/O, no clock, no tokio. Time is a [`Timestamp`]
//! argument and randomness comes from a seeded [`rng::SplitMix64`], so one seed gives one
//! timeline. The model speaks the observation vocabulary of [`crate::observe`], so whatever
//! the poller can be fed, the model can feed.
//!
//! - [`coordinator`]: the JobManager's `CheckpointCoordinator` (trigger schedule, request
//!   decider, timeouts, subsumption, tolerable failures).
//! - [`alignment`]: barriers travelling through a job graph, per subtask (aligned, unaligned,
//!   aligned with timeout, at-least-once).
//! - [`replay`]: drives the coordinator with a job's observed history and measures how far
//!   the predicted trigger times are from the observed ones.
//!
//! [`Timestamp`]: crate::time::Timestamp

pub mod alignment;
pub mod coordinator;
pub mod replay;
pub mod rng;
