//! The layout of the round-trip benches: the Control Plane side on a current-thread
//! tokio runtime on the calling thread, the Edge side on another current-thread
//! runtime on a thread of its own, as two processes would be (which CPUs they share
//! is the kernel's choice; the spinners keep both on one, BENCHMARKS.md "Method").

use std::str::FromStr;
use std::thread::JoinHandle;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// The two runtimes; dropping this stops the Edge's thread and joins it.
pub struct TwoRuntimes {
    cp: Runtime,
    edge: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TwoRuntimes {
    /// Builds both runtimes and starts the Edge's thread.
    pub fn start() -> std::io::Result<Self> {
        let cp = Builder::new_current_thread().enable_all().build()?;
        let edge_rt = Builder::new_current_thread().enable_all().build()?;
        let edge = edge_rt.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            edge_rt.block_on(async {
                let _ = stopped.await;
            })
        });
        Ok(Self {
            cp,
            edge,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The Control Plane's runtime (run it with `block_on` on this thread).
    pub fn cp(&self) -> &Runtime {
        &self.cp
    }

    /// The Edge's runtime, running on its own thread.
    pub fn edge(&self) -> &Handle {
        &self.edge
    }
}

impl Drop for TwoRuntimes {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Command-line argument `n` (1 = the first) parsed as `T`, or `default` when it is
/// absent or does not parse.
pub fn arg<T: FromStr>(n: usize, default: T) -> T {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}
