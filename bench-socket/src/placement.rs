//! Which CPUs the round-trip benches' two threads share while a system is timed.
//!
//! A sequential round trip between two threads is a ping-pong: one side works while
//! the other waits. With the spinners of [`crate::Spinners`] running, no CPU looks idle
//! to the kernel, and the socket's wake-up places the woken thread on the waker's CPU:
//! both threads then run on one CPU, switching twice per round trip. Every
//! user-space instruction either side runs is then on the round trip's path. Now and
//! then the two threads land on different CPUs instead; every wake-up then crosses
//! vCPUs, which on a virtual machine can cost ~20 µs each way, and every system's
//! round trip takes ~45 µs instead of ~8. [`Placement`] samples where the two threads
//! last ran, so a run's table says which regime it measured.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// No system is being timed.
const NONE: usize = usize::MAX;
/// How often the two threads' CPUs are read.
const PERIOD: Duration = Duration::from_millis(2);

/// The calling thread's kernel thread id (Linux: `/proc/thread-self` links to
/// `<pid>/task/<tid>`); `None` elsewhere.
pub fn thread_id() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// The CPU thread `tid` of this process last ran on (field 39 of its `stat`).
fn last_cpu(tid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it start at 3.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
}

/// Samples, every 2 ms, whether two threads last ran on the same CPU, counting the
/// samples per system being timed (see [`Placement::timing`]).
pub struct Placement {
    current: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// Per system: samples on the same CPU, samples in all.
    counts: Arc<Mutex<Vec<(u64, u64)>>>,
    sampler: Option<JoinHandle<()>>,
}

impl Placement {
    /// Starts sampling threads `a` and `b` for `systems` systems.
    pub fn start(a: u32, b: u32, systems: usize) -> Self {
        let current = Arc::new(AtomicUsize::new(NONE));
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Mutex::new(vec![(0, 0); systems]));
        let sampler = {
            let (current, stop, counts) = (current.clone(), stop.clone(), counts.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(PERIOD);
                    let system = current.load(Ordering::Relaxed);
                    if system == NONE {
                        continue;
                    }
                    let (Some(ca), Some(cb)) = (last_cpu(a), last_cpu(b)) else {
                        continue;
                    };
                    // Still the same system after the reads: the sample is its own.
                    if current.load(Ordering::Relaxed) != system {
                        continue;
                    }
                    if let Ok(mut counts) = counts.lock()
                        && let Some((same, all)) = counts.get_mut(system)
                    {
                        *same += u64::from(ca == cb);
                        *all += 1;
                    }
                }
            })
        };
        Self {
            current,
            stop,
            counts,
            sampler: Some(sampler),
        }
    }

    /// Samples from now on count for `system` (`None`: for no system).
    pub fn timing(&self, system: Option<usize>) {
        self.current
            .store(system.unwrap_or(NONE), Ordering::Relaxed);
    }

    /// Stops sampling and returns what was counted.
    pub fn finish(mut self) -> Shares {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        Shares(self.counts.lock().map(|c| c.clone()).unwrap_or_default())
    }

    /// Starts sampling the calling thread (a round-trip bench's Control Plane side) and
    /// `edge_rt`'s thread; `None` where thread ids cannot be read (not Linux).
    pub async fn start_this_thread_and(
        edge_rt: &tokio::runtime::Handle,
        systems: usize,
    ) -> Option<Self> {
        let edge_thread = edge_rt.spawn(async { thread_id() }).await.ok()??;
        Some(Self::start(thread_id()?, edge_thread, systems))
    }
}

/// Per system: samples with the two threads on the same CPU, samples in all. Empty
/// when nothing was sampled.
#[derive(Debug, Default)]
pub struct Shares(Vec<(u64, u64)>);

impl Shares {
    /// The share (0–1) of `system`'s samples with both threads on one CPU, and the
    /// number of samples; `None` without any.
    pub fn get(&self, system: usize) -> Option<(f64, u64)> {
        let (same, all) = *self.0.get(system)?;
        (all > 0).then(|| (same as f64 / all as f64, all))
    }

    /// A table cell: "97 % of 31", or "—" without samples.
    pub fn cell(&self, system: usize) -> String {
        match self.get(system) {
            Some((share, n)) => format!("{:.0} % of {n}", share * 100.0),
            None => "—".to_owned(),
        }
    }

    /// Whether most of `system`'s samples had the threads on two CPUs.
    pub fn mostly_apart(&self, system: usize) -> bool {
        self.get(system).is_some_and(|(share, _)| share < 0.5)
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_threads_cpu() {
        let Some(tid) = thread_id() else {
            return; // not Linux
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu = last_cpu(tid).expect("own stat readable");
        assert!((cpu as usize) < cpus.max(64), "cpu {cpu}");
    }

    #[test]
    fn one_thread_against_itself_is_always_on_the_same_cpu() {
        let Some(tid) = thread_id() else {
            return;
        };
        let placement = Placement::start(tid, tid, 2);
        placement.timing(Some(1));
        std::thread::sleep(Duration::from_millis(30));
        placement.timing(None);
        let shares = placement.finish();
        assert_eq!(shares.get(0), None);
        let (share, samples) = shares.get(1).expect("sampled");
        assert!(samples >= 3, "{samples} samples");
        assert_eq!(share, 1.0);
    }
}
