//! Fuzzes the Flink REST models and their conversion: any bytes either fail to parse or convert
//! without panicking.
#![no_main]

use checkpoint_sentinel::sources::flink::{convert, dto};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(stats) = serde_json::from_slice::<dto::CheckpointingStatistics>(data) {
        let _ = convert::in_progress(&stats.history);
        for cp in &stats.history {
            let _ = convert::finished(cp, &[]);
        }
        if let Some(counts) = &stats.counts {
            let _ = convert::counts(counts);
        }
    }
    if let Ok(details) = serde_json::from_slice::<dto::TaskCheckpointDetails>(data) {
        if let Ok(cp) = serde_json::from_slice::<dto::CheckpointStatistics>(data) {
            let view = convert::VertexDetails { vertex_id: "v", name: "v", details: &details };
            let _ = convert::finished(&cp, &[view]);
        }
    }
    if let Ok(config) = serde_json::from_slice::<dto::CheckpointConfig>(data) {
        let _ = convert::settings(&config);
    }
    let _ = serde_json::from_slice::<dto::JobDetails>(data);
    let _ = serde_json::from_slice::<dto::JobsOverview>(data);
});
