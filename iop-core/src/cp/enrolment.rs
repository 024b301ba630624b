//! Who may enrol (PROTOCOL.md §4.1.2 step 4): credentials are kept and compared only as
//! SHA-256 hashes, in constant time, and never printed.

use std::collections::BTreeMap;

use iop_proto::HelloRejectReason;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// An enrolment secret in clear. Its `Debug` never shows the bytes, and they are
/// zeroed when it is dropped; hash it with [`Credential::hash`] and drop it as soon as
/// possible. No `PartialEq`: compare hashes, which compare in constant time.
#[derive(Clone)]
pub struct Credential(zeroize::Zeroizing<Vec<u8>>);

impl Credential {
    /// Wraps secret bytes.
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self(zeroize::Zeroizing::new(secret.into()))
    }

    /// The SHA-256 hash of the secret, the only form the Control Plane keeps.
    pub fn hash(&self) -> CredentialHash {
        CredentialHash::of(&self.0)
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

/// The SHA-256 hash of a credential. Equality is constant-time; `Debug` is redacted.
#[derive(Clone, Copy)]
pub struct CredentialHash([u8; 32]);

impl CredentialHash {
    /// Hashes raw credential bytes (as received in a hello).
    pub fn of(secret: &[u8]) -> Self {
        Self(Sha256::digest(secret).into())
    }

    /// A hash computed elsewhere (e.g. loaded from a config file of hashes).
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Parses 64 hex digits (either case, surrounding whitespace ignored), the form an
    /// enrolment file stores (`printf '%s' secret | sha256sum`). `None` otherwise.
    pub fn from_hex(text: &str) -> Option<Self> {
        let text = text.trim().as_bytes();
        if text.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            let digit = |c: u8| char::from(c).to_digit(16);
            let (hi, lo) = (digit(*pair.first()?)?, digit(*pair.get(1)?)?);
            *byte = u8::try_from(hi * 16 + lo).ok()?;
        }
        Some(Self(bytes))
    }

    /// The hash as 64 lowercase hex digits (what [`from_hex`](Self::from_hex) reads).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Constant-time comparison.
    pub fn ct_eq(&self, other: &CredentialHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl PartialEq for CredentialHash {
    fn eq(&self, other: &Self) -> bool {
        self.ct_eq(other)
    }
}

impl Eq for CredentialHash {}

impl std::fmt::Debug for CredentialHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialHash(<redacted>)")
    }
}

/// Which Edges may enrol. There is no default: a Control Plane names its policy, so
/// that accepting every Edge is a choice visible where the server is configured.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EnrolmentPolicy {
    /// Any Edge with a valid id, whatever its credential. For development and tests
    /// only: anyone who can reach the port enrols under any id.
    AcceptAny,
    /// Only the listed Edges, each with its credential.
    AllowList(AllowList),
}

impl EnrolmentPolicy {
    /// Checks an Edge id and the hash of the credential it presented:
    /// `UNKNOWN_EDGE` or `BAD_CREDENTIAL` when refused.
    pub fn check(
        &self,
        edge_id: &str,
        presented: &CredentialHash,
    ) -> Result<(), HelloRejectReason> {
        match self {
            EnrolmentPolicy::AcceptAny => Ok(()),
            EnrolmentPolicy::AllowList(list) => list.check(edge_id, presented),
        }
    }
}

/// Edge ids allowed to enrol, each with the hash of its credential.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    entries: BTreeMap<String, CredentialHash>,
}

impl AllowList {
    /// An empty list (nobody may enrol).
    pub fn new() -> Self {
        Self::default()
    }

    /// Allows `edge_id` with `credential` (only its hash is kept); replaces an earlier
    /// entry.
    pub fn insert(&mut self, edge_id: impl Into<String>, credential: &Credential) {
        self.insert_hash(edge_id, credential.hash());
    }

    /// Allows `edge_id` with an already hashed credential.
    pub fn insert_hash(&mut self, edge_id: impl Into<String>, hash: CredentialHash) {
        self.entries.insert(edge_id.into(), hash);
    }

    /// Builder form of [`AllowList::insert`].
    pub fn with(mut self, edge_id: impl Into<String>, credential: &Credential) -> Self {
        self.insert(edge_id, credential);
        self
    }

    /// Removes `edge_id`; true when it was listed.
    pub fn remove(&mut self, edge_id: &str) -> bool {
        self.entries.remove(edge_id).is_some()
    }

    /// True when `edge_id` is listed.
    pub fn contains(&self, edge_id: &str) -> bool {
        self.entries.contains_key(edge_id)
    }

    fn check(&self, edge_id: &str, presented: &CredentialHash) -> Result<(), HelloRejectReason> {
        match self.entries.get(edge_id) {
            None => Err(HelloRejectReason::UnknownEdge),
            Some(expected) if expected.ct_eq(presented) => Ok(()),
            Some(_) => Err(HelloRejectReason::BadCredential),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_form_round_trips_and_matches_sha256sum() {
        // printf '%s' 'the-secret' | sha256sum
        let hex = "5a90063288c04e4df59164f25bacb191f42f8f7e11b127030cb01fffd22af956";
        let parsed = CredentialHash::from_hex(hex).expect("64 hex digits");
        assert_eq!(parsed.to_hex(), hex);
        assert_eq!(CredentialHash::from_hex(&hex.to_uppercase()), Some(parsed));
        assert_eq!(CredentialHash::of(b"the-secret"), parsed);
        assert_eq!(CredentialHash::from_hex(&hex[..63]), None);
        assert_eq!(CredentialHash::from_hex(&format!("{}g", &hex[..63])), None);
        assert_eq!(CredentialHash::from_hex(&format!("{}é", &hex[..62])), None);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let c = Credential::new(b"hunter2-secret".to_vec());
        let list = AllowList::new().with("edge-1", &c);
        let all = format!(
            "{c:?} {:?} {:?}",
            c.hash(),
            EnrolmentPolicy::AllowList(list)
        );
        assert!(!all.contains("hunter2"));
        assert!(all.contains("<redacted>"));
    }

    #[test]
    fn allow_list_checks_id_then_credential() {
        let good = Credential::new("s3cret");
        let p = EnrolmentPolicy::AllowList(AllowList::new().with("edge-1", &good));
        assert_eq!(p.check("edge-1", &good.hash()), Ok(()));
        assert_eq!(
            p.check("edge-1", &CredentialHash::of(b"wrong")),
            Err(HelloRejectReason::BadCredential)
        );
        assert_eq!(
            p.check("edge-2", &good.hash()),
            Err(HelloRejectReason::UnknownEdge)
        );
        assert_eq!(
            EnrolmentPolicy::AcceptAny.check("x", &CredentialHash::of(b"")),
            Ok(())
        );
    }
}
