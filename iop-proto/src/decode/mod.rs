//! The single-pass, limit-checking decode of an `iop.Envelope` behind
//! [`FrameDecoder`](crate::FrameDecoder) and [`decode_envelope`](crate::decode_envelope).
//!
//! A hand-written merge per message builds the prost-generated structs while it
//! enforces every cap of [`check_envelope`](crate::check_envelope) (the reference
//! pre-scan, which stays the specification of the limits): element counts before each
//! push, string lengths before each copy, and the same running estimate of prost's
//! heap against the frame's budget before each allocation. It charges exactly what the
//! pre-scan charges, in the same order, so both reach the same verdict.
//!
//! Reading the bytes is prost's: keys, varints and scalars go through
//! `prost::encoding`, nested messages are bounded as prost's `merge_loop` bounds them
//! (a length-delimited field may run past its parent's end, which is then reported as
//! malformed), unknown fields are skipped as `skip_field` skips them (groups included,
//! with prost's recursion budget), a singular sub-message or oneof variant occurring
//! again is merged, another variant replaces it, and the last map entry for a key
//! wins. On malformed input the error is prost's own `DecodeError`, field path
//! included: where this module detects the fault itself, it lets the prost function
//! that would have failed there produce the error.
//!
//! When the bytes are malformed, [`check_envelope`](crate::check_envelope) then decides
//! between a limit error and the malformed one: the pre-scan goes on past faults prost
//! stops at, and the reference verdict (pre-scan first, then prost) reports a limit
//! broken after such a fault. That costs a second, zero-allocation walk of frames that
//! close the session anyway.

/// Decodes string field `$f` of message `$msg` (its protobuf name, a literal) into
/// `$m.$f` with the length cap of `$class` ([`wire::Class`]): a limit error names the
/// field `iop.<msg>.<f>`, a malformed one gets `<msg>.<f>` on prost's error path.
macro_rules! string_field {
    ($d:ident, $wt:ident, $buf:ident, $msg:literal, $m:ident . $f:ident, $class:ident) => {{
        let step = $d.string(
            $wt,
            &mut $m.$f,
            $buf,
            concat!("iop.", $msg, ".", stringify!($f)),
            Class::$class,
        );
        $d.at(step, $msg, stringify!($f))
    }};
}

/// The [`envelope::MapNames`] of map field `$f` of message `$msg` (protobuf names,
/// literals): `iop.<msg>.<f>`, and its `.key` and `.value`.
macro_rules! map_names {
    ($msg:literal, $f:literal) => {
        MapNames {
            map: concat!("iop.", $msg, ".", $f),
            key: concat!("iop.", $msg, ".", $f, ".key"),
            value: concat!("iop.", $msg, ".", $f, ".value"),
        }
    };
}

/// [`string_field!`] for one element of a repeated string field, at most
/// `limits.$limit` of them.
macro_rules! repeated_string_field {
    ($d:ident, $wt:ident, $buf:ident, $msg:literal, $m:ident . $f:ident, $class:ident, $limit:ident) => {{
        let limit = $d.limits.$limit;
        let step = $d.push_string(
            $wt,
            &mut $m.$f,
            $buf,
            concat!("iop.", $msg, ".", stringify!($f)),
            Class::$class,
            limit,
        );
        $d.at(step, $msg, stringify!($f))
    }};
}

mod command;
mod envelope;
mod hello;
mod load;
mod session;
mod status;
mod wire;

use prost::DecodeError;

use crate::Envelope;
use crate::frame::{FrameError, Sticky};
use crate::limits::heap::{map_growth, string_bytes, vec_growth};
use crate::limits::{DecodeLimits, LimitError, check_envelope};

/// Why decoding stopped; the details are in [`Decoder::failure`].
pub(crate) struct Stop;

/// The result of one step of the decode.
pub(crate) type Step<T = ()> = Result<T, Stop>;

/// What went wrong, kept out of the (one-byte) results of the hot path.
enum Failure {
    Limit(LimitError),
    Malformed(DecodeError),
}

/// One decode: the limits, the frame's budget, the running estimate of prost's heap.
pub(crate) struct Decoder<'l> {
    limits: &'l DecodeLimits,
    budget: usize,
    estimated: usize,
    failure: Option<Failure>,
}

/// Decodes one frame body, checking `limits` as it goes.
///
/// The envelope is decoded in place in the result, which the caller returns as it
/// is: no copy of the 168-byte `Envelope` on the way out of the frame decoder.
/// On failure the error is also left in `sticky`, if any.
#[inline]
pub(crate) fn decode(
    body: &[u8],
    limits: &DecodeLimits,
    sticky: Option<Sticky<'_>>,
) -> Result<Option<Envelope>, FrameError> {
    let mut out = Ok(Some(Envelope::default()));
    if let Ok(Some(envelope)) = &mut out
        && let Err(err) = decode_into(envelope, body, limits)
    {
        if let Some(sticky) = sticky {
            sticky.fail(&err);
        }
        out = Err(err);
    }
    out
}

/// Decodes one frame body into `envelope` (a default one), checking `limits` as it
/// goes; on failure, `envelope` holds what was decoded so far.
#[inline]
pub(crate) fn decode_into(
    envelope: &mut Envelope,
    body: &[u8],
    limits: &DecodeLimits,
) -> Result<(), FrameError> {
    let mut decoder = Decoder {
        limits,
        budget: limits.decoded_budget(body.len()),
        estimated: 0,
        failure: None,
    };
    match decoder.envelope(envelope, body) {
        Ok(()) => Ok(()),
        Err(Stop) => Err(decoder.verdict(body)),
    }
}

impl Decoder<'_> {
    /// The error of a decode that stopped.
    #[cold]
    fn verdict(self, body: &[u8]) -> FrameError {
        match self.failure {
            Some(Failure::Limit(err)) => FrameError::LimitExceeded(err),
            Some(Failure::Malformed(err)) => match check_envelope(body, self.limits) {
                Err(limit) => FrameError::LimitExceeded(limit),
                Ok(_) => FrameError::Undecodable(err),
            },
            // Every `Stop` records its failure first; were one missing, the reference
            // decode gives the verdict.
            None => reference(body, self.limits),
        }
    }
}

/// The reference verdict: the pre-scan, then prost.
#[cold]
fn reference(body: &[u8], limits: &DecodeLimits) -> FrameError {
    use prost::Message;
    match check_envelope(body, limits) {
        Err(limit) => FrameError::LimitExceeded(limit),
        Ok(_) => match Envelope::decode(body) {
            Err(err) => FrameError::Undecodable(err),
            #[allow(deprecated)]
            Ok(_) => FrameError::Undecodable(DecodeError::new("iop-proto: inconsistent decode")),
        },
    }
}

impl Decoder<'_> {
    /// Records a limit error and stops.
    #[cold]
    fn limit(&mut self, err: LimitError) -> Stop {
        self.failure = Some(Failure::Limit(err));
        Stop
    }

    /// Records prost's error and stops.
    #[cold]
    fn malformed(&mut self, err: DecodeError) -> Stop {
        self.failure = Some(Failure::Malformed(err));
        Stop
    }

    /// Passes on prost's result, recording its error.
    #[inline(always)]
    fn prost<T>(&mut self, result: Result<T, DecodeError>) -> Step<T> {
        match result {
            Ok(value) => Ok(value),
            Err(err) => Err(self.malformed(err)),
        }
    }

    /// Adds a (message, field) level to the path of a malformed-input error, as the
    /// prost-generated `merge_field` does; a limit error is left as it is.
    #[inline(always)]
    fn at(&mut self, step: Step, message: &'static str, field: &'static str) -> Step {
        if step.is_err() {
            self.push_path(message, field);
        }
        step
    }

    #[cold]
    fn push_path(&mut self, message: &'static str, field: &'static str) {
        if let Some(Failure::Malformed(err)) = &mut self.failure {
            err.push(message, field);
        }
    }

    /// Adds `bytes` to the estimate, which may not exceed the budget.
    #[inline(always)]
    fn charge(&mut self, bytes: usize) -> Step {
        self.estimated = self.estimated.saturating_add(bytes);
        if self.estimated > self.budget {
            return Err(self.over_budget());
        }
        Ok(())
    }

    #[cold]
    fn over_budget(&mut self) -> Stop {
        let err = LimitError::DecodedTooLarge {
            estimated: self.estimated,
            budget: self.budget,
        };
        self.limit(err)
    }

    /// Admits one more element into a repeated field that holds `len` (cap checked),
    /// charging its `Vec`'s growth when the push will reallocate.
    #[inline(always)]
    fn admit(&mut self, len: usize, limit: u32, field: &'static str, elem: usize) -> Step {
        if len >= limit as usize {
            return Err(self.limit(LimitError::TooManyElements { field, limit }));
        }
        match vec_growth(len, elem) {
            0 => Ok(()),
            growth => self.charge(growth),
        }
    }

    /// Admits one more map entry, `count` being the entries read so far.
    #[inline]
    fn admit_entry(&mut self, count: &mut u32, field: &'static str) -> Step {
        let limit = self.limits.max_map_entries;
        if *count >= limit {
            return Err(self.limit(LimitError::TooManyElements { field, limit }));
        }
        let before = *count as usize;
        *count += 1;
        self.charge(map_growth(before))
    }

    /// Checks a string or bytes length against its cap and charges its copy.
    #[inline(always)]
    fn admit_string(&mut self, field: &'static str, len: usize, limit: u32) -> Step {
        if len > limit as usize {
            return Err(self.limit(LimitError::StringTooLong { field, len, limit }));
        }
        self.charge(string_bytes(len))
    }
}
