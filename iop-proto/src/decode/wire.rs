//! Reading the wire format exactly as prost reads it, with the limit checks slotted in
//! before each allocation.

use std::mem::size_of;

use prost::DecodeError;
use prost::encoding::{
    DecodeContext, WireType, check_wire_type, decode_key, decode_varint, merge_loop, skip_field,
    string,
};

use super::{Decoder, Step};
use crate::limits::LimitError;

/// Which cap a string field has.
#[derive(Clone, Copy)]
pub(super) enum Class {
    /// Ids and map keys: [`DecodeLimits::max_id_len`](crate::DecodeLimits::max_id_len).
    Id,
    /// Any other text: [`DecodeLimits::max_text_len`](crate::DecodeLimits::max_text_len).
    Text,
}

/// prost's recursion budget (`DecodeContext`) left for the fields of a message at
/// each level: its limit is 100 at the envelope, one less per nested message or map
/// entry. Only unknown groups can come near it.
pub(super) const ENVELOPE_FIELDS: u32 = 100;

/// Runs a prost function that is known to fail on these bytes and returns its error,
/// so that a fault this module detects itself is reported exactly as prost reports it.
#[cold]
fn error_of(result: Result<(), DecodeError>, what: &'static str) -> DecodeError {
    match result {
        Err(err) => err,
        #[allow(deprecated)]
        Ok(()) => DecodeError::new(what),
    }
}

/// Generates the merge of a varint scalar field: the varint read inline (one byte) or
/// by prost's `decode_varint` and converted as prost's merge converts it; a wrong wire
/// type goes to prost's own merge, so the value and the error are prost's.
macro_rules! varint_scalar {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $merge:path, |$v:ident| $convert:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub(super) fn $name(
            &mut self,
            wire_type: WireType,
            value: &mut $ty,
            buf: &mut &[u8],
            message: &'static str,
            field: &'static str,
        ) -> Step {
            let step = if wire_type == WireType::Varint {
                self.varint(buf).map(|$v| *value = $convert)
            } else {
                let result = $merge(wire_type, value, buf, DecodeContext::default());
                self.prost(result)
            };
            self.at(step, message, field)
        }
    };
}

impl Decoder<'_> {
    varint_scalar!(
        /// A `uint64` field.
        uint64, u64, prost::encoding::uint64::merge, |v| v
    );
    varint_scalar!(
        /// A `uint32` field.
        uint32, u32, prost::encoding::uint32::merge, |v| v as u32
    );
    varint_scalar!(
        /// An `int32` field, or an (open) enum.
        int32, i32, prost::encoding::int32::merge, |v| v as i32
    );
    varint_scalar!(
        /// A `bool` field.
        boolean, bool, prost::encoding::bool::merge, |v| v != 0
    );

    /// A field key, as prost's `decode_key` reads it: a one-byte key inline, any
    /// other (and every invalid one) by prost.
    #[inline(always)]
    pub(super) fn key(&mut self, buf: &mut &[u8]) -> Step<(u32, WireType)> {
        if let Some((&byte, rest)) = buf.split_first()
            && (8..0x80).contains(&byte)
        {
            let wire_type = match byte & 7 {
                0 => Some(WireType::Varint),
                1 => Some(WireType::SixtyFourBit),
                2 => Some(WireType::LengthDelimited),
                3 => Some(WireType::StartGroup),
                4 => Some(WireType::EndGroup),
                5 => Some(WireType::ThirtyTwoBit),
                _ => None,
            };
            if let Some(wire_type) = wire_type {
                *buf = rest;
                return Ok((u32::from(byte >> 3), wire_type));
            }
        }
        self.prost(decode_key(buf))
    }

    /// A varint (a length prefix), as prost's `decode_varint` reads it.
    #[inline(always)]
    fn varint(&mut self, buf: &mut &[u8]) -> Step<u64> {
        if let Some((&byte, rest)) = buf.split_first()
            && byte < 0x80
        {
            *buf = rest;
            return Ok(u64::from(byte));
        }
        self.prost(decode_varint(buf))
    }

    fn cap(&self, class: Class) -> u32 {
        match class {
            Class::Id => self.limits.max_id_len,
            Class::Text => self.limits.max_text_len,
        }
    }

    /// Reads the value of a length-delimited string field (its key already read),
    /// checking its cap and charging its copy before it is made.
    #[inline(always)]
    fn str_value<'b>(
        &mut self,
        wire_type: WireType,
        buf: &mut &'b [u8],
        field: &'static str,
        class: Class,
    ) -> Step<&'b str> {
        let start = *buf;
        let len = self.length(wire_type, buf)?;
        let limit = self.cap(class);
        self.admit_string(field, len, limit)?;
        let (bytes, rest) = buf.split_at(len);
        *buf = rest;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text),
            Err(_) => Err(self.string_error(start)),
        }
    }

    /// Reads a length prefix as prost's `string`/`bytes` merges do: wire type first,
    /// then a length no longer than the rest of the whole body.
    #[inline(always)]
    fn length(&mut self, wire_type: WireType, buf: &mut &[u8]) -> Step<usize> {
        if wire_type != WireType::LengthDelimited {
            return Err(self.wire_type_error(wire_type));
        }
        let start = *buf;
        let len = self.varint(buf)?;
        if len > buf.len() as u64 {
            return Err(self.string_error(start));
        }
        Ok(len as usize)
    }

    #[cold]
    pub(super) fn wire_type_error(&mut self, wire_type: WireType) -> super::Stop {
        let err = error_of(
            check_wire_type(WireType::LengthDelimited, wire_type),
            "invalid wire type",
        );
        self.malformed(err)
    }

    /// prost's error for the string value at `start` (too long for the buffer, or not
    /// UTF-8).
    #[cold]
    fn string_error(&mut self, mut start: &[u8]) -> super::Stop {
        let mut scratch = String::new();
        let err = error_of(
            string::merge(
                WireType::LengthDelimited,
                &mut scratch,
                &mut start,
                DecodeContext::default(),
            ),
            "invalid string value",
        );
        self.malformed(err)
    }

    /// A singular string field: last one wins.
    #[inline]
    pub(super) fn string(
        &mut self,
        wire_type: WireType,
        value: &mut String,
        buf: &mut &[u8],
        field: &'static str,
        class: Class,
    ) -> Step {
        let text = self.str_value(wire_type, buf, field, class)?;
        if value.capacity() >= text.len() {
            value.clear();
            value.push_str(text);
        } else {
            *value = String::from(text);
        }
        Ok(())
    }

    /// One element of a repeated string field, whose count is capped at `limit`.
    #[inline]
    pub(super) fn push_string(
        &mut self,
        wire_type: WireType,
        values: &mut Vec<String>,
        buf: &mut &[u8],
        field: &'static str,
        class: Class,
        limit: u32,
    ) -> Step {
        if wire_type != WireType::LengthDelimited {
            return Err(self.wire_type_error(wire_type));
        }
        self.admit(values.len(), limit, field, size_of::<String>())?;
        let text = self.str_value(wire_type, buf, field, class)?;
        values.push(String::from(text));
        Ok(())
    }

    /// A singular `bytes` field (text cap). prost copies it through a temporary
    /// `Bytes`, so the estimate charges it twice, as the pre-scan does.
    pub(super) fn bytes(
        &mut self,
        wire_type: WireType,
        value: &mut Vec<u8>,
        buf: &mut &[u8],
        field: &'static str,
    ) -> Step {
        // `bytes::merge` fails as `string::merge` does, but for UTF-8.
        let len = self.length(wire_type, buf)?;
        let limit = self.limits.max_text_len;
        self.admit_string(field, len, limit)?;
        self.charge(len)?;
        let (bytes, rest) = buf.split_at(len);
        *buf = rest;
        value.clear();
        value.extend_from_slice(bytes);
        Ok(())
    }

    /// Reads a nested message's length (its key already read) and calls `field` for
    /// each of its fields, as prost's `message::merge` and `merge_loop` do: a field
    /// may run past the message's end, which is then an error.
    #[inline(always)]
    pub(super) fn message<'b>(
        &mut self,
        wire_type: WireType,
        buf: &mut &'b [u8],
        mut field: impl FnMut(&mut Self, u32, WireType, &mut &'b [u8]) -> Step,
    ) -> Step {
        if wire_type != WireType::LengthDelimited {
            return Err(self.wire_type_error(wire_type));
        }
        let start = *buf;
        let len = self.varint(buf)?;
        if len > buf.len() as u64 {
            return Err(self.underflow(start));
        }
        let limit = buf.len() - len as usize;
        while buf.len() > limit {
            let (tag, wire_type) = self.key(buf)?;
            field(self, tag, wire_type, buf)?;
        }
        if buf.len() != limit {
            return Err(self.length_exceeded());
        }
        Ok(())
    }

    /// prost's error for a message length longer than the rest of the body.
    #[cold]
    fn underflow(&mut self, mut start: &[u8]) -> super::Stop {
        let err = error_of(
            merge_loop(&mut (), &mut start, DecodeContext::default(), |_, _, _| {
                Ok(())
            }),
            "buffer underflow",
        );
        self.malformed(err)
    }

    /// prost's error for a field that ran past its message's end.
    #[cold]
    fn length_exceeded(&mut self) -> super::Stop {
        // A one-byte message whose only field takes two bytes.
        let mut bytes: &[u8] = &[1, 0, 0];
        let err = error_of(
            merge_loop(
                &mut (),
                &mut bytes,
                DecodeContext::default(),
                |_, buf: &mut &[u8], _| {
                    *buf = buf.get(2..).unwrap_or_default();
                    Ok(())
                },
            ),
            "delimited length exceeded",
        );
        self.malformed(err)
    }

    /// Skips an unknown field as prost's `skip_field` does for a message whose fields
    /// have `ctx` of prost's recursion budget left, with the depth cap on groups.
    #[inline]
    pub(super) fn skip(
        &mut self,
        wire_type: WireType,
        tag: u32,
        buf: &mut &[u8],
        ctx: u32,
    ) -> Step {
        if wire_type == WireType::StartGroup {
            return self.group(tag, buf, ctx, 1);
        }
        // `ctx` is far from 0 here (at least 96): prost's own check passes.
        let result = skip_field(wire_type, tag, buf, DecodeContext::default());
        self.prost(result)
    }

    /// Skips a group at nesting `depth` whose start key (field `tag`) was read, with
    /// `ctx` of prost's recursion budget left. Recursion is bounded by `ctx`.
    fn group(&mut self, tag: u32, buf: &mut &[u8], ctx: u32, depth: u32) -> Step {
        if ctx == 0 {
            return Err(self.recursion_limit());
        }
        let limit = self.limits.max_unknown_depth;
        if depth > limit {
            return Err(self.limit(LimitError::TooDeep { limit }));
        }
        loop {
            let (inner_tag, inner_type) = self.key(buf)?;
            match inner_type {
                WireType::EndGroup => {
                    if inner_tag != tag {
                        let err = error_of(
                            skip_field(
                                WireType::EndGroup,
                                inner_tag,
                                &mut &[][..],
                                DecodeContext::default(),
                            ),
                            "unexpected end group tag",
                        );
                        return Err(self.malformed(err));
                    }
                    return Ok(());
                }
                WireType::StartGroup => self.group(inner_tag, buf, ctx - 1, depth + 1)?,
                _ => {
                    if ctx == 1 {
                        return Err(self.recursion_limit());
                    }
                    let result = skip_field(inner_type, inner_tag, buf, DecodeContext::default());
                    self.prost(result)?;
                }
            }
        }
    }

    /// prost's error when its recursion budget runs out.
    #[cold]
    fn recursion_limit(&mut self) -> super::Stop {
        // Group starts nested deeper than the budget.
        let starts = [0x0b_u8; ENVELOPE_FIELDS as usize + 2];
        let err = error_of(
            skip_field(
                WireType::StartGroup,
                1,
                &mut &starts[..],
                DecodeContext::default(),
            ),
            "recursion limit reached",
        );
        self.malformed(err)
    }
}
