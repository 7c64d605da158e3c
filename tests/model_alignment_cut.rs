//! Property test of the alignment model: whatever the graph, rates and backlogs, each mode's
//! snapshot is a consistent cut (Chandy-Lamport) on every channel.

use checkpoint_sentinel::model::alignment::{
    AlignmentConfig, EdgeSpec, JobGraph, Mode, Partitioner, VertexSpec, simulate,
};
use proptest::prelude::*;

/// A layered DAG: 1–2 sources, 1–2 middle vertices (each fed by every source), one sink fed
/// by every middle vertex. Forward edges need equal parallelism, so they only appear then.
fn graph() -> impl Strategy<Value = JobGraph> {
    let vertex = |source: bool| {
        (1u32..=3, 50.0f64..5_000.0, 1.0f64..4.0, 0u64..2_000_000).prop_map(move |(p, rate, slow, state)| {
            VertexSpec {
                name: if source { "src".into() } else { "op".into() },
                parallelism: p,
                source_rate: source.then_some(rate),
                process_rate: rate * 4.0,
                hot_slowdown: slow,
                state_bytes: state,
            }
        })
    };
    let edge_kind = (0u8..3, 0.0f64..0.9, 0u64..200_000);
    (
        proptest::collection::vec(vertex(true), 1..=2),
        proptest::collection::vec(vertex(false), 1..=2),
        vertex(false),
        proptest::collection::vec(edge_kind, 6),
        prop_oneof![Just(256u64), Just(4_096u64)],
    )
        .prop_map(|(sources, middle, sink, kinds, buffer_bytes)| {
            let mut vertices = sources.clone();
            let first_middle = vertices.len();
            vertices.extend(middle.clone());
            let sink_index = vertices.len();
            vertices.push(sink);
            let mut edges = Vec::new();
            let mut k = 0;
            let mut add = |vertices: &Vec<VertexSpec>, from: usize, to: usize| {
                let (kind, hot_share, backlog) = kinds[k % kinds.len()];
                k += 1;
                let forward_ok = vertices[from].parallelism == vertices[to].parallelism;
                let partitioner = match kind {
                    0 if forward_ok => Partitioner::Forward,
                    1 => Partitioner::Rebalance,
                    _ => Partitioner::Hash { hot_share },
                };
                edges.push(EdgeSpec { from, to, partitioner, backlog_bytes: backlog });
            };
            for s in 0..sources.len() {
                for m in 0..middle.len() {
                    add(&vertices, s, first_middle + m);
                }
            }
            for m in 0..middle.len() {
                add(&vertices, first_middle + m, sink_index);
            }
            JobGraph { vertices, edges, buffer_bytes }
        })
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Aligned),
        Just(Mode::Unaligned),
        (0u64..400).prop_map(|timeout_ms| Mode::AlignedWithTimeout { timeout_ms }),
        Just(Mode::AtLeastOnce),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_mode_takes_a_consistent_cut(graph in graph(), mode in mode(), seed in any::<u64>()) {
        let config = AlignmentConfig { mode, horizon_ms: 10_000_000, ..AlignmentConfig::default() };
        let result = simulate(&graph, &config, seed);
        prop_assert!(result.end_to_end_ms.is_some(), "every subtask snapshots");
        for (i, cut) in result.channels.iter().enumerate() {
            match mode {
                Mode::Aligned => {
                    // No record after the barrier is in the snapshot; none before it is missing.
                    prop_assert_eq!(cut.processed_post, 0, "channel {}: {:?}", i, cut);
                    prop_assert_eq!(cut.processed_pre, cut.emitted_pre, "channel {}: {:?}", i, cut);
                    prop_assert_eq!(cut.persisted_pre + cut.persisted_post, 0, "channel {}: {:?}", i, cut);
                }
                Mode::Unaligned | Mode::AlignedWithTimeout { .. } => {
                    // Snapshot plus persisted channel data is exactly what preceded the barrier.
                    prop_assert_eq!(cut.processed_post, 0, "channel {}: {:?}", i, cut);
                    prop_assert_eq!(cut.persisted_post, 0, "channel {}: {:?}", i, cut);
                    prop_assert_eq!(cut.processed_pre + cut.persisted_pre, cut.emitted_pre, "channel {}: {:?}", i, cut);
                }
                Mode::AtLeastOnce => {
                    // Nothing is lost; records after the barrier may be in (duplicates on replay).
                    prop_assert_eq!(cut.processed_pre, cut.emitted_pre, "channel {}: {:?}", i, cut);
                    prop_assert_eq!(cut.persisted_pre + cut.persisted_post, 0, "channel {}: {:?}", i, cut);
                }
            }
        }
        if mode == Mode::Aligned {
            prop_assert!(result.subtasks.iter().all(|s| !s.unaligned && s.persisted_bytes == 0));
        }
    }
}
