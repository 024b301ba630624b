//! What one durable commit costs the engine, as the claims' group commit chooses
//! between its two ways of writing (`iop_cluster::group_commit`): a group of N
//! compare-and-set writes sent as one JetStream atomic batch, against the same N sent
//! as single writes pipelined on one connection. One nats-server with the example
//! configuration (`sync_interval: always`); each size 30 times, fresh keys each time.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin group_commit
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use iop_bench_socket::{Row, Table};
use iop_cluster::testing::NatsServer;

type BoxError = Box<dyn std::error::Error>;

const ROUNDS: u32 = 30;
const SIZES: [usize; 8] = [1, 4, 8, 16, 24, 32, 64, 128];

fn main() -> Result<(), BoxError> {
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/nats/nats-server.conf");
    let nats = NatsServer::try_start_with_config(&config)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(run(&nats.url()))
}

fn headers(expected: u64) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "Nats-Expected-Last-Subject-Sequence",
        expected.to_string().as_str(),
    );
    h
}

async fn run(url: &str) -> Result<(), BoxError> {
    let client = async_nats::connect(url).await?;
    let js = jetstream::new(client.clone());
    js.create_stream(stream::Config {
        name: "GROUP_COMMIT".into(),
        subjects: vec!["gc.>".into()],
        max_messages_per_subject: 1,
        allow_atomic_publish: true,
        ..Default::default()
    })
    .await?;
    let mut table = Table::new(
        "N compare-and-set writes on sync_interval: always, per group (30 groups each)",
        "one atomic batch",
        "N single writes, pipelined",
    );
    for n in SIZES {
        let mut atomic = Duration::ZERO;
        let mut singles = Duration::ZERO;
        for round in 0..ROUNDS {
            let t = Instant::now();
            let id = format!("b{n}-{round}");
            for i in 0..n {
                let mut h = headers(0);
                h.insert("Nats-Batch-Id", id.as_str());
                h.insert("Nats-Batch-Sequence", (i + 1).to_string().as_str());
                let subject = format!("gc.a.{id}.{i}");
                if i + 1 < n {
                    client.publish_with_headers(subject, h, "x".into()).await?;
                } else {
                    h.insert("Nats-Batch-Commit", "1");
                    let reply = client.request_with_headers(subject, h, "x".into()).await?;
                    let ack: serde_json::Value = serde_json::from_slice(&reply.payload)?;
                    if ack.get("error").is_some() {
                        return Err(format!("batch refused: {ack}").into());
                    }
                }
            }
            atomic += t.elapsed();

            let t = Instant::now();
            let mut acks = Vec::with_capacity(n);
            for i in 0..n {
                let subject = format!("gc.s.{n}-{round}.{i}");
                acks.push(
                    js.publish_with_headers(subject, headers(0), "x".into())
                        .await?,
                );
            }
            for ack in acks {
                ack.await?;
            }
            singles += t.elapsed();
        }
        let (a, s) = (atomic / ROUNDS, singles / ROUNDS);
        table.push(Row::new(
            format!("{n} writes"),
            format!("{} µs", a.as_micros()),
            format!("{} µs", s.as_micros()),
            format!("{:.2}", a.as_secs_f64() / s.as_secs_f64()),
            "—",
            None,
        ));
    }
    println!("{table}");
    Ok(())
}
