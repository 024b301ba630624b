//! Enum fields as enums: [`WireEnum`], and one accessor per enum field of the wire
//! messages that keeps a value this crate does not know (a newer peer's) instead of
//! folding it into the default as prost's own accessors do.
//!
//! ```
//! use iop_proto::{CommandPhase, EdgeCommandEvent, WireEnum};
//!
//! let mut event = EdgeCommandEvent { phase: CommandPhase::Running as i32, ..Default::default() };
//! assert_eq!(event.phase_enum(), CommandPhase::Running);
//! event.phase = 99; // from a newer peer
//! assert_eq!(event.phase_enum(), WireEnum::Unknown(99));
//! assert_eq!(event.phase_enum().known(), None);
//! ```

use crate::{
    CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeCommandResponse, EdgeHelloResponse,
    EdgeNodeEvent, EdgeNodeSnapshot, GoAway, GoAwayReason, HelloRejectReason, NodeEventKind,
    NodeState, ProviderCategory, ProviderHealth, ProviderSnapshot, ProviderStatus,
};

/// The value of a wire enum field: one of `E`'s, or a number `E` does not have (a newer
/// peer may send values this version does not know; they are kept, not guessed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WireEnum<E> {
    /// A value of `E`.
    Known(E),
    /// A number `E` has no value for.
    Unknown(i32),
}

impl<E: TryFrom<i32>> WireEnum<E> {
    /// The value of the wire number `n`.
    pub fn from_wire(n: i32) -> Self {
        E::try_from(n).map_or(WireEnum::Unknown(n), WireEnum::Known)
    }
}

impl<E> WireEnum<E> {
    /// The known value, if it is one.
    pub fn known(self) -> Option<E> {
        match self {
            WireEnum::Known(e) => Some(e),
            WireEnum::Unknown(_) => None,
        }
    }
}

impl<E: PartialEq> PartialEq<E> for WireEnum<E> {
    fn eq(&self, other: &E) -> bool {
        matches!(self, WireEnum::Known(e) if e == other)
    }
}

impl<E> From<E> for WireEnum<E> {
    fn from(e: E) -> Self {
        WireEnum::Known(e)
    }
}

impl ProviderSnapshot {
    /// Its six numbers of PROTOCOL.md §5.2, in field order: `capacity`, `in_flight`,
    /// `queued`, `long_context_capacity`, `long_context_in_flight`,
    /// `long_context_queued` (all zero while the provider is offline).
    pub fn numbers(&self) -> [u32; 6] {
        [
            self.capacity,
            self.in_flight,
            self.queued,
            self.long_context_capacity,
            self.long_context_in_flight,
            self.long_context_queued,
        ]
    }
}

impl crate::ProviderLoad {
    /// Its six numbers of PROTOCOL.md §5.2, in the order of
    /// [`ProviderSnapshot::numbers`].
    pub fn numbers(&self) -> [u32; 6] {
        [
            self.capacity,
            self.in_flight,
            self.queued,
            self.long_context_capacity,
            self.long_context_in_flight,
            self.long_context_queued,
        ]
    }

    /// Whether it keeps PROTOCOL.md §5 as an update must (§4.8): a provider that is
    /// offline (health OFFLINE or status UNAVAILABLE), or whose node is not
    /// connected, reports zeros and is not admission-eligible.
    ///
    /// ```
    /// use iop_proto::{ProviderHealth, ProviderLoad};
    /// let mut p = ProviderLoad { capacity: 4, node_connected: true, ..Default::default() };
    /// assert!(p.keeps_zero_rule());
    /// p.node_connected = false;
    /// assert!(!p.keeps_zero_rule());
    /// p.capacity = 0;
    /// assert!(p.keeps_zero_rule());
    /// p.node_connected = true;
    /// p.health = ProviderHealth::Offline as i32;
    /// p.admission_eligible = true;
    /// assert!(!p.keeps_zero_rule());
    /// ```
    pub fn keeps_zero_rule(&self) -> bool {
        let offline = self.health == crate::ProviderHealth::Offline as i32
            || self.status == crate::ProviderStatus::Unavailable as i32;
        let down = offline || !self.node_connected;
        !down || (self.numbers() == [0; 6] && !self.admission_eligible)
    }
}

impl crate::CommandPhase {
    /// SUCCEEDED, FAILED, CANCELLED or TIMED_OUT: a command's last phase (PROTOCOL.md
    /// §4.4).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Cancelled | Self::TimedOut
        )
    }
}

macro_rules! names {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for WireEnum<$t> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    WireEnum::Known(e) => f.write_str(e.as_str_name()),
                    WireEnum::Unknown(n) => write!(f, "unknown value {n}"),
                }
            }
        }
    )*};
}

names!(
    CommandPhase,
    CommandRejectReason,
    GoAwayReason,
    HelloRejectReason,
    NodeEventKind,
    NodeState,
    ProviderCategory,
    ProviderHealth,
    ProviderStatus
);

macro_rules! accessors {
    ($($msg:ty { $($(#[$doc:meta])* $name:ident: $field:ident as $enum:ty;)* })*) => {$(
        impl $msg {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> WireEnum<$enum> {
                    WireEnum::from_wire(self.$field)
                }
            )*
        }
    )*};
}

accessors! {
    EdgeCommandEvent {
        /// `phase` as a [`CommandPhase`].
        phase_enum: phase as CommandPhase;
    }
    EdgeCommandResponse {
        /// `reject_reason` as a [`CommandRejectReason`].
        reject_reason_enum: reject_reason as CommandRejectReason;
    }
    EdgeNodeEvent {
        /// `kind` as a [`NodeEventKind`].
        kind_enum: kind as NodeEventKind;
    }
    EdgeNodeSnapshot {
        /// `state` as a [`NodeState`].
        state_enum: state as NodeState;
    }
    ProviderSnapshot {
        /// `category` as a [`ProviderCategory`].
        category_enum: category as ProviderCategory;
        /// `status` as a [`ProviderStatus`].
        status_enum: status as ProviderStatus;
        /// `health` as a [`ProviderHealth`].
        health_enum: health as ProviderHealth;
    }
    EdgeHelloResponse {
        /// `reject_reason` as a [`HelloRejectReason`].
        reject_reason_enum: reject_reason as HelloRejectReason;
    }
    GoAway {
        /// `reason` as a [`GoAwayReason`].
        reason_enum: reason as GoAwayReason;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_values_and_their_names() {
        let p = ProviderSnapshot {
            status: ProviderStatus::Degraded as i32,
            health: 42,
            ..Default::default()
        };
        assert_eq!(p.status_enum(), ProviderStatus::Degraded);
        assert_eq!(p.status_enum().to_string(), "PROVIDER_STATUS_DEGRADED");
        assert_eq!(p.health_enum(), WireEnum::Unknown(42));
        assert_eq!(p.health_enum().to_string(), "unknown value 42");
        assert_eq!(
            WireEnum::from(NodeState::Ready),
            WireEnum::<NodeState>::from_wire(3)
        );
    }

    #[test]
    fn a_providers_numbers_are_in_field_order() {
        let p = ProviderSnapshot {
            capacity: 1,
            in_flight: 2,
            queued: 3,
            long_context_capacity: 4,
            long_context_in_flight: 5,
            long_context_queued: 6,
            ..Default::default()
        };
        assert_eq!(p.numbers(), [1, 2, 3, 4, 5, 6]);
    }
}
