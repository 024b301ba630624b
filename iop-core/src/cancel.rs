//! Cancellation (PROTOCOL.md §4.4): an Edge-owned operation like any other, by
//! convention [`CANCEL_OPERATION`], whose metadata [`CANCEL_TARGET_KEY`] names the
//! command to stop and whose selector is empty.
//!
//! An Edge that advertises it asks the target's handler to stop; the target ends
//! CANCELLED (or in its own terminal phase if it finished first), and the cancel itself
//! ends SUCCEEDED saying which, or FAILED when the Edge holds no running command of
//! that id. The Control Plane builds one with [`CommandSpec::cancel`](crate::cp::CommandSpec::cancel).

use crate::ids::MAX_ID_LEN;

/// The operation name of a cancellation.
pub const CANCEL_OPERATION: &str = "command.cancel";

/// The metadata key naming the command a cancellation stops.
pub const CANCEL_TARGET_KEY: &str = "command_id";

/// The id a cancellation of `command_id` takes when the caller chooses none:
/// `<command_id>.cancel`, so that asking twice is the same command (idempotent, §4.4);
/// `None` when that would be over the id cap (the Control Plane chooses one).
pub fn cancel_id(command_id: &str) -> Option<String> {
    const SUFFIX: &str = ".cancel";
    (command_id.len() + SUFFIX.len() <= MAX_ID_LEN).then(|| format!("{command_id}{SUFFIX}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_id_is_the_target_id_with_a_suffix_while_it_fits() {
        assert_eq!(cancel_id("cmd-1").as_deref(), Some("cmd-1.cancel"));
        let longest = "x".repeat(MAX_ID_LEN - 7);
        assert!(crate::ids::is_valid_id(&cancel_id(&longest).unwrap()));
        assert_eq!(cancel_id(&"x".repeat(MAX_ID_LEN - 6)), None);
    }
}
