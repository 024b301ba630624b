//! A headless Chromium over WebDriver, for timing the dashboard: the browser test's
//! own driver (`iop-server/tests/cli_support/webdriver.rs`), with the two helpers it
//! expects of its parent module.

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicU32, Ordering};

#[path = "../../iop-server/tests/cli_support/webdriver.rs"]
#[allow(dead_code)]
mod webdriver;

pub use webdriver::Browser;

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A unique path in the temp directory.
pub fn temp_path(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("iop-bench-{}-{n}-{name}", std::process::id()))
}
