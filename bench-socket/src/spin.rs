//! Keeping the machine's CPUs from idling while a timed socket bench runs.

use std::time::{Duration, Instant};

/// Keeps the machine's CPUs from idling while the bench runs: one `nice -n 19`
/// busy loop per CPU (this binary re-run with the argument `spin`), killed on drop.
///
/// On a virtual machine an idle vCPU halts, and waking it (the other side of a round
/// trip wakes its peer's thread on the other CPU) costs the host's scheduling latency:
/// on this machine, idle, a loopback round trip of the raw echo took ~80 µs instead of
/// ~8 µs, which drowns every system's own cost and pushes all ratios towards 1. A
/// lowest-priority spinner keeps each vCPU running; it gets about 1.5 % of a CPU when
/// a bench thread wants it (CFS weight 15 against 1 024) and its time is not counted in
/// the bench process's CPU time. `IOP_RT_NO_SPIN=1` measures the idle machine instead.
pub struct Spinners(Vec<std::process::Child>);

impl Spinners {
    /// In a spinner process (first argument `spin`): spins until killed, or for an
    /// hour at most, then exits. Otherwise starts the spinners.
    pub fn start_or_spin() -> Self {
        if std::env::args().nth(1).as_deref() == Some("spin") {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(3_600) {
                std::hint::spin_loop();
            }
            std::process::exit(0);
        }
        Self::start()
    }

    fn start() -> Self {
        if std::env::var_os("IOP_RT_NO_SPIN").is_some() {
            return Self(Vec::new());
        }
        let Ok(exe) = std::env::current_exe() else {
            return Self(Vec::new());
        };
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let children = (0..cpus)
            .filter_map(|_| {
                std::process::Command::new("nice")
                    .args(["-n", "19"])
                    .arg(&exe)
                    .arg("spin")
                    .spawn()
                    .ok()
            })
            .collect();
        // Let them start before anything is timed.
        std::thread::sleep(Duration::from_millis(200));
        Self(children)
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
