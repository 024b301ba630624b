//! The timer task: the core's deadlines, woken for at most once per
//! [`TIMER_COALESCE`].

use std::sync::Arc;
use std::time::Duration;

use super::state::CpShared;
use crate::Runtime;

/// The shortest time between two wakes of the timer task. A deadline that falls
/// sooner after the last wake waits for the end of this window and is handled with
/// every other deadline due by then, so 10 000 Edges' heartbeat checks and status
/// refreshes (thousands of deadlines a second) cost a hundred wakes a second, not
/// one each; a lone deadline still fires on time. Every deadline of the protocol is
/// seconds long, so none is hurt by being this late.
const TIMER_COALESCE: Duration = Duration::from_millis(10);

pub(super) async fn timer_loop<R: Runtime>(shared: Arc<CpShared<R>>) {
    let mut last_wake: Option<std::time::Instant> = None;
    loop {
        let (deadline, done) = {
            let mut state = shared.lock();
            let next = state.next_deadline();
            state.timer_armed = next;
            (next, state.stopped && state.conns.is_empty())
        };
        if done {
            break;
        }
        match deadline {
            Some(at) => {
                let mut wake = shared.clock.to_std(at);
                if let Some(window) = last_wake.map(|last| last + TIMER_COALESCE) {
                    wake = wake.max(window);
                }
                let fired = futures_lite::future::or(
                    async {
                        R::sleep_until(wake).await;
                        true
                    },
                    async {
                        shared.timer.wait().await;
                        false
                    },
                )
                .await;
                if fired {
                    last_wake = Some(std::time::Instant::now());
                    shared.with(|state, now| {
                        state.cp.handle_timeout(now);
                        state.fleet.handle_timeout(now);
                    });
                }
            }
            None => shared.timer.wait().await,
        }
    }
    tracing::debug!("timer stopped");
}
