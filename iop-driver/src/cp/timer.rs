//! The timer task: the core's deadlines, one at a time.

use std::sync::Arc;

use super::state::CpShared;
use crate::Runtime;
use crate::signal::lock;

pub(super) async fn timer_loop<R: Runtime>(shared: Arc<CpShared<R>>) {
    loop {
        let (deadline, done) = {
            let mut state = lock(&shared.state);
            let next = state.cp.poll_timeout();
            state.timer_armed = next;
            (next, state.stopped && state.conns.is_empty())
        };
        if done {
            break;
        }
        match deadline {
            Some(at) => {
                let fired = futures_lite::future::or(
                    async {
                        R::sleep_until(shared.clock.to_std(at)).await;
                        true
                    },
                    async {
                        shared.timer.wait().await;
                        false
                    },
                )
                .await;
                if fired {
                    shared.with(|state, now| state.cp.handle_timeout(now));
                }
            }
            None => shared.timer.wait().await,
        }
    }
    tracing::debug!("timer stopped");
}
