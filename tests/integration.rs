//! The integration suites, compiled into one test binary: one link of the crate and its
//! dependencies instead of one per suite, which keeps a clean build's disk and time small
//! (CI ran out of disk with a binary per suite). Run one suite with
//! `cargo test --test integration <suite>::`, e.g. `cargo test --test integration restart::`.

mod common;

mod advise_fixtures;
mod alert_replay;
mod alertmanager;
mod api_errors;
mod cli_json;
mod concurrent_poll;
mod demo;
mod demo_exposition;
mod demo_shadow;
mod diagnose;
mod discovery;
mod disk_faults;
mod ended_jobs;
mod evidence;
mod failure_evidence;
mod faults;
mod fixtures_parse;
mod golden;
mod golden_text;
mod history_backlog;
mod hostile;
mod kube_stub;
mod kubernetes;
mod layering;
mod locations;
mod log_kinds;
mod logs_fixtures;
mod logs_storm;
mod logs_tail;
mod matcher_reference;
mod metrics_doc;
mod model_alignment_cut;
mod model_replay;
mod pending_subtasks;
mod preflight;
mod probe_port;
mod reload;
mod rescale;
mod restart;
mod restore;
mod rule_checklist;
mod rules_agree;
mod scan_streaming;
mod shadow;
mod shadow_expiry;
mod sharding;
mod store;
mod thread_fixtures;
mod thread_looker;
mod tidy;
mod tls;
mod traces;
