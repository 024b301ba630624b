//! One system's status round trips only, for profilers: `rt_profile
//! ours|echo|floor|cores N [NODES]` runs N sequential round trips of ours
//! (`request_status` against an `EdgeClient` with NODES × 4 providers, default 0), of
//! the raw TCP echo of the same bytes, of the codec floor (`floor`: hand-written ends
//! that only frame, encode and decode, 0 nodes; see `codec_floor`), or of the cores
//! floor (`cores`: our two cores driven by hand-written loops, no driver, 0 nodes),
//! set up as `roundtrip` sets them up (two
//! current-thread runtimes, the Control Plane side in a spawned task), and prints only
//! the count done. Instructions per
//! round trip: run it under `valgrind --tool=callgrind` with two values of N and divide
//! the difference of the totals by the difference of the Ns; syscalls per round trip:
//! `strace -f -c`. See BENCHMARKS.md §4.
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use iop_bench::fixtures;
use iop_bench_socket::core_floor::CoreFloorCp;
use iop_bench_socket::echo;
use iop_bench_socket::floor::FloorCp;
use iop_bench_socket::ours::Ours;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One of the two floors of `codec_floor`.
enum Floor {
    Codec(Box<FloorCp>),
    Cores(Box<CoreFloorCp>),
}

fn main() -> Result<(), BoxError> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "ours".into());
    let n: usize = iop_bench_socket::arg(2, 10_000);
    let nodes: usize = iop_bench_socket::arg(3, 0);
    let rts = iop_bench_socket::TwoRuntimes::start()?;
    let edge = rts.edge();
    let done = rts.cp().block_on(async {
        let registry = fixtures::registry(nodes, 4);
        let done;
        if which == "ours" {
            let ours = Ours::start(edge, "edge-p", registry).await?;
            let cp2 = ours.cp();
            done = tokio::spawn(async move {
                let mut done = 0;
                for _ in 0..n {
                    if cp2.request_status("edge-p", vec![]).await.is_ok() {
                        done += 1;
                    }
                }
                done
            })
            .await?;
            drop(ours);
        } else if which == "floor" || which == "cores" {
            let mut floor = if which == "floor" {
                Floor::Codec(Box::new(FloorCp::connect(edge, "edge-p").await?))
            } else {
                Floor::Cores(Box::new(CoreFloorCp::connect(edge, "edge-p").await?))
            };
            done = tokio::spawn(async move {
                let mut done = 0;
                for _ in 0..n {
                    let answered = match &mut floor {
                        Floor::Codec(f) => f.round_trip().await.is_ok(),
                        Floor::Cores(f) => f.round_trip().await.is_ok(),
                    };
                    if !answered {
                        break;
                    }
                    done += 1;
                }
                done
            })
            .await?;
        } else {
            let (request_frame, response_frame) = echo::frames(&registry)?;
            let mut stream =
                echo::connect(edge, request_frame.len(), response_frame.clone()).await?;
            done = tokio::spawn(async move {
                let mut buf = vec![0u8; response_frame.len()];
                let mut done = 0;
                for _ in 0..n {
                    if echo::round_trip(&mut stream, &request_frame, &mut buf)
                        .await
                        .is_err()
                    {
                        break;
                    }
                    done += 1;
                }
                done
            })
            .await?;
        }
        Ok::<usize, BoxError>(done)
    })?;
    println!("{which}: {done} round trips");
    Ok(())
}
