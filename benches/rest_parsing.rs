//! REST model parsing: Flink 2.3.0 responses captured from a real cluster, decoded into the
//! serde models and converted to observations, as the poller does for each response.

use checkpoint_sentinel::sources::flink::{convert, dto};

fn main() {
    divan::main();
}

fn fixture(name: &str) -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/flink-2.3.0/healthy/rest/");
    std::fs::read(format!("{path}{name}")).expect("fixture")
}

/// `/jobs/:id/checkpoints` (counts, summary, history of 10): once per job per poll.
#[divan::bench]
fn checkpoints(bencher: divan::Bencher) {
    let body = fixture("checkpoints.json");
    bencher.counter(divan::counter::BytesCount::new(body.len())).bench(|| {
        let stats: dto::CheckpointingStatistics = serde_json::from_slice(divan::black_box(&body)).unwrap();
        (stats.counts.as_ref().map(convert::counts), convert::in_progress(&stats.history).len())
    });
}

/// `/jobs/overview`: once per cluster per poll.
#[divan::bench]
fn jobs_overview(bencher: divan::Bencher) {
    let body = fixture("jobs-overview.json");
    bencher
        .bench(|| serde_json::from_slice::<dto::JobsOverview>(divan::black_box(&body)).unwrap().jobs.len());
}

/// `/jobs/:id/checkpoints/details/:cp/subtasks/:vertex`: once per vertex of each new checkpoint.
#[divan::bench]
fn subtask_details(bencher: divan::Bencher) {
    let body = fixture("checkpoint-details/checkpoint-20-subtasks-857e9877747f27b5e758680f3644828a.json");
    bencher.counter(divan::counter::BytesCount::new(body.len())).bench(|| {
        serde_json::from_slice::<dto::TaskCheckpointDetails>(divan::black_box(&body)).unwrap().subtasks.len()
    });
}

/// A history entry plus its three vertices' details converted to a finished checkpoint.
#[divan::bench]
fn convert_finished_checkpoint(bencher: divan::Bencher) {
    let stats: dto::CheckpointingStatistics = serde_json::from_slice(&fixture("checkpoints.json")).unwrap();
    let entry =
        stats.history.iter().find(|c| convert::status(c).is_some()).expect("a finished entry").clone();
    let details: Vec<(String, dto::TaskCheckpointDetails)> = [
        "5a44ef70092224af50ee1c30c6ad3cec",
        "857e9877747f27b5e758680f3644828a",
        "f4ed146d70273ee4d2e38f322c939c7e",
    ]
    .iter()
    .map(|v| {
        let body = fixture(&format!("checkpoint-details/checkpoint-20-subtasks-{v}.json"));
        (v.to_string(), serde_json::from_slice(&body).unwrap())
    })
    .collect();
    bencher.bench(|| {
        let vertices: Vec<convert::VertexDetails<'_>> = details
            .iter()
            .map(|(id, d)| convert::VertexDetails { vertex_id: id, name: "vertex", details: d })
            .collect();
        convert::finished(divan::black_box(&entry), &vertices).map(|f| f.operators.len())
    });
}
