//! A credential holder that never prints its bytes and wipes them on drop.

use std::fmt;

use zeroize::Zeroizing;

/// Secret bytes (the Edge's enrollment credential).
///
/// `Debug` prints `<redacted>`; the bytes are overwritten with zeros when the value
/// is dropped (by `zeroize`, which the compiler cannot optimise away: copies made by the allocator or
/// by encoding a hello frame are outside its reach). There is deliberately no
/// `PartialEq`: a secret is never compared here, and a naive comparison would leak
/// timing.
#[derive(Clone, Default)]
pub struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Wraps `bytes`.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(Zeroizing::new(bytes.into()))
    }

    /// The secret bytes, for building the hello. Do not log them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// True when there is no secret.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value.as_bytes())
    }
}

impl From<Vec<u8>> for Secret {
    fn from(value: Vec<u8>) -> Self {
        Self::new(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_bytes() {
        let s = Secret::from("hunter2");
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(<redacted>)");
        assert_eq!(s.expose(), b"hunter2");
    }
}
