//! `sender_limits`: arbitrary inputs to every sending API of both sides — commands and
//! status requests of the Control Plane, reports, configs and hellos, and status
//! answers from registries of any shape of the Edge — through the cross-side oracle
//! [`iop_core::testing::sender::check`]: the API refuses with its typed error, or the
//! *peer's* decoder, with the peer's limits, takes everything it queued (PROTOCOL.md §4.6).
//!
//! Sizes are drawn near the limits that bound them ([`Size`]), so that short inputs
//! reach both sides of every cap.

use arbitrary::Arbitrary;
use iop_core::limits::{
    MAX_CONTROL_PLANE_FRAME_LEN, MAX_HELLO_METADATA_VALUE_LEN, MAX_HELLO_OPERATIONS, MAX_ID_LEN,
    MAX_INFLIGHT_COMMANDS, MAX_MAP_ENTRIES, MAX_NODES, MAX_RETAINED_COMMANDS,
    MAX_SOFTWARE_VERSION_LEN, MAX_TEXT_LEN,
};
use iop_core::testing::sender::{
    Case, CommandCase, ConfigCase, NodeShape, RegistryCase, ReportCase, StatusCase, check,
};

/// A size near a limit: small, just under, at, just over, or anywhere below twice it.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct Size(u16);

impl Size {
    /// The size this stands for next to `limit`.
    pub fn near(self, limit: usize) -> usize {
        let v = usize::from(self.0);
        match v % 5 {
            0 => v / 5 % 4,
            1 => limit.saturating_sub(1),
            2 => limit,
            3 => limit + 1,
            _ => v / 5 % (2 * limit + 1),
        }
    }

    /// [`near`](Self::near) for a count whose limit makes a case slow (10 000 node
    /// ids, 256 providers): one input in 16 goes near it, the others stay small, so
    /// the target keeps its pace (`tests/sender_limits.rs` covers the large ones).
    pub fn near_rarely(self, limit: usize) -> usize {
        let v = usize::from(self.0);
        if v % 16 == 0 {
            Size(self.0 / 16).near(limit)
        } else {
            v % 8
        }
    }
}

/// One call of a sending API, its sizes near their limits.
#[derive(Debug, Arbitrary)]
pub enum Input {
    /// `ControlPlane::send_command`.
    Command {
        /// Operation name length.
        operation: Size,
        /// Selector length.
        selector: Size,
        /// Metadata entries, key and value lengths.
        entries: Size,
        /// Key length.
        key: Size,
        /// Value length.
        value: Size,
        /// An application-chosen id of this length.
        command_id: Option<Size>,
    },
    /// `ControlPlane::request_status`.
    Status {
        /// Node ids.
        count: Size,
        /// Their length.
        len: Size,
    },
    /// An Edge's report.
    Report {
        /// Message length.
        message: Size,
        /// Detail entries.
        entries: Size,
        /// Key length.
        key: Size,
        /// Value length.
        value: Size,
        /// SUCCEEDED rather than RUNNING.
        terminal: bool,
        /// The CP's announced limit, in KiB above 64.
        cp_kib: u16,
        /// Reported while disconnected, replayed to a CP announcing this.
        replay_kib: Option<u16>,
    },
    /// An Edge's config and hellos.
    Config {
        /// Operations.
        operations: Size,
        /// Operation name length.
        operation_len: Size,
        /// Metadata entries.
        metadata: Size,
        /// Metadata value length.
        value: Size,
        /// Software version length.
        version: Size,
        /// Credential length.
        credential: Size,
        /// `max_inflight_commands`.
        inflight: Size,
        /// `max_retained_commands`.
        retained: Size,
        /// `max_frame_len` near the largest CP frame.
        frame: Size,
        /// Finished and running commands held at the second hello (small).
        held: (u8, u8),
    },
    /// A status answer.
    Registry {
        /// Node shapes.
        nodes: Vec<(u8, Size, Size, Size, bool)>,
        /// Ask for every other node by id.
        named: bool,
        /// From a custom registry that keeps only to its byte budget.
        naive: bool,
        /// The CP's announced limit, in KiB above 64.
        cp_kib: u16,
    },
}

fn entries(count: usize, key: usize, value: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|n| {
            (
                format!("{n:0>width$}", width = key.max(1)),
                "v".repeat(value),
            )
        })
        .collect()
}

fn id(len: usize, n: usize) -> String {
    let s = format!("{n}-{}", "i".repeat(len));
    s[..len.min(s.len())].to_owned()
}

fn kib(k: u16) -> u32 {
    (64 + u32::from(k) % 4_033) * 1024
}

impl Input {
    /// The oracle's case for this input.
    pub fn case(&self) -> Case {
        match *self {
            Input::Command {
                operation,
                selector,
                entries: n,
                key,
                value,
                command_id,
            } => Case::Command(CommandCase {
                operation: id(operation.near(MAX_ID_LEN), 0),
                selector: "s".repeat(selector.near(MAX_TEXT_LEN)),
                metadata: entries(
                    n.near(MAX_MAP_ENTRIES),
                    key.near(MAX_ID_LEN),
                    value.near(MAX_TEXT_LEN),
                ),
                command_id: command_id.map(|l| id(l.near(MAX_ID_LEN), 7)),
            }),
            Input::Status { count, len } => {
                let len = len.near(MAX_ID_LEN).max(1);
                Case::Status(StatusCase {
                    node_ids: (0..count.near_rarely(MAX_NODES))
                        .map(|i| id(len, i))
                        .collect(),
                })
            }
            Input::Report {
                message,
                entries: n,
                key,
                value,
                terminal,
                cp_kib,
                replay_kib,
            } => Case::Report(ReportCase {
                message: "m".repeat(message.near(MAX_TEXT_LEN)),
                detail: entries(
                    n.near(MAX_MAP_ENTRIES),
                    key.near(MAX_ID_LEN),
                    value.near(MAX_TEXT_LEN),
                ),
                terminal,
                cp_max_frame_len: kib(cp_kib),
                while_disconnected: replay_kib.is_some(),
                next_cp_max_frame_len: replay_kib.map_or(0, kib),
            }),
            Input::Config {
                operations,
                operation_len,
                metadata,
                value,
                version,
                credential,
                inflight,
                retained,
                frame,
                held,
            } => {
                let op_len = operation_len.near(MAX_ID_LEN).max(1);
                Case::Config(ConfigCase {
                    edge_id: "edge-1".into(),
                    operations: (0..operations.near(MAX_HELLO_OPERATIONS))
                        .map(|i| id(op_len, i))
                        .collect(),
                    metadata: entries(
                        metadata.near(15),
                        8,
                        value.near(MAX_HELLO_METADATA_VALUE_LEN),
                    ),
                    software_version: "v".repeat(version.near(MAX_SOFTWARE_VERSION_LEN)),
                    credential: vec![7; credential.near(MAX_TEXT_LEN)],
                    max_inflight_commands: inflight.near(MAX_INFLIGHT_COMMANDS),
                    max_retained_commands: retained.near(MAX_RETAINED_COMMANDS),
                    max_frame_len: frame.near(MAX_CONTROL_PLANE_FRAME_LEN) as u32,
                    finished: usize::from(held.0 % 32),
                    running: usize::from(held.1 % 8),
                })
            }
            Input::Registry {
                ref nodes,
                named,
                naive,
                cp_kib,
            } => {
                let shapes: Vec<NodeShape> = nodes
                    .iter()
                    .take(8)
                    .enumerate()
                    .map(|(i, &(kind, providers, models, labels, ready))| NodeShape {
                        node_id: format!("node-{i:03}"),
                        providers: providers.near_rarely(256),
                        models: models.near_rarely(256),
                        model_len: usize::from(kind % 130),
                        labels: labels.near_rarely(MAX_MAP_ENTRIES),
                        ready,
                    })
                    .collect();
                let node_ids = if named {
                    shapes
                        .iter()
                        .step_by(2)
                        .map(|s| s.node_id.clone())
                        .collect()
                } else {
                    Vec::new()
                };
                Case::Registry(RegistryCase {
                    nodes: shapes,
                    node_ids,
                    cp_max_frame_len: kib(cp_kib),
                    naive,
                })
            }
        }
    }
}

/// Runs one input: the oracle must hold.
pub fn run(input: Input) {
    let case = input.case();
    if let Err(broken) = check(&case) {
        panic!("PROTOCOL.md §4.6 broken: {broken}\n{case:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_reach_both_sides_of_a_limit() {
        let limit = 128;
        let got: Vec<usize> = (0..5u16).map(|k| Size(k).near(limit)).collect();
        assert_eq!(got, [0, 127, 128, 129, 0]);
        assert!((0..5000u16).all(|k| Size(k).near(limit) <= 2 * limit + 1));
    }

    #[test]
    fn a_small_case_holds() {
        run(Input::Command {
            operation: Size(2),
            selector: Size(0),
            entries: Size(3),
            key: Size(2),
            value: Size(3),
            command_id: None,
        });
    }
}
