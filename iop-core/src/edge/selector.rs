//! Target selectors (SPEC §6): grammar and level rules. Matching against nodes is the
//! registry's job ([`EdgeRegistry::matching_nodes`](super::EdgeRegistry::matching_nodes)).

use super::config::TargetLevel;
use crate::ids::{is_valid_id, validate_label};

/// A parsed `target_selector`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Selector {
    /// Empty: the Edge itself.
    Edge,
    /// `*`: every configured node (or the Edge, for an edge-level operation).
    All,
    /// `node:<node_id>`.
    Node(String),
    /// `provider:<node_id>/<provider_id>`.
    Provider {
        /// The node.
        node_id: String,
        /// The provider on it.
        provider_id: String,
    },
    /// `label:<key>=<value>`.
    Label {
        /// Label key.
        key: String,
        /// Label value.
        value: String,
    },
}

/// Why a selector is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// The text matches none of the forms of SPEC §6.
    #[error("selector {0:?} is not empty, `*`, `node:`, `provider:` or `label:`")]
    Syntax(String),
    /// The selector names the wrong level for the operation.
    #[error("a {selector} selector does not fit an operation taking {level:?} targets")]
    WrongLevel {
        /// What the selector names.
        selector: &'static str,
        /// What the operation takes.
        level: TargetLevel,
    },
}

impl Selector {
    /// Parses `text` per SPEC §6.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let bad = || SelectorError::Syntax(text.to_owned());
        if text.is_empty() {
            return Ok(Selector::Edge);
        }
        if text == "*" {
            return Ok(Selector::All);
        }
        if let Some(id) = text.strip_prefix("node:") {
            return is_valid_id(id)
                .then(|| Selector::Node(id.to_owned()))
                .ok_or_else(bad);
        }
        if let Some(rest) = text.strip_prefix("provider:") {
            let (node_id, provider_id) = rest.split_once('/').ok_or_else(bad)?;
            return (is_valid_id(node_id) && is_valid_id(provider_id))
                .then(|| Selector::Provider {
                    node_id: node_id.to_owned(),
                    provider_id: provider_id.to_owned(),
                })
                .ok_or_else(bad);
        }
        if let Some(rest) = text.strip_prefix("label:") {
            let (key, value) = rest.split_once('=').ok_or_else(bad)?;
            validate_label("label key", key).map_err(|_| bad())?;
            validate_label("label value", value).map_err(|_| bad())?;
            return Ok(Selector::Label {
                key: key.to_owned(),
                value: value.to_owned(),
            });
        }
        Err(bad())
    }

    /// Checks the selector against an operation's level. An edge-level operation
    /// accepts `*` as "the Edge" (returned as [`Selector::Edge`]).
    pub fn for_level(self, level: TargetLevel) -> Result<Self, SelectorError> {
        match (level, self) {
            (TargetLevel::Edge, Selector::Edge | Selector::All) => Ok(Selector::Edge),
            (TargetLevel::Edge, _) => Err(SelectorError::WrongLevel {
                selector: "node-level",
                level,
            }),
            (TargetLevel::Node, Selector::Edge) => Err(SelectorError::WrongLevel {
                selector: "edge-level",
                level,
            }),
            (TargetLevel::Node, s) => Ok(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        assert_eq!(Selector::parse(""), Ok(Selector::Edge));
        assert_eq!(Selector::parse("*"), Ok(Selector::All));
        assert_eq!(Selector::parse("node:n1"), Ok(Selector::Node("n1".into())));
        assert_eq!(
            Selector::parse("provider:n1/p.2"),
            Ok(Selector::Provider {
                node_id: "n1".into(),
                provider_id: "p.2".into()
            })
        );
        assert_eq!(
            Selector::parse("label:zone/a=eu-1"),
            Ok(Selector::Label {
                key: "zone/a".into(),
                value: "eu-1".into()
            })
        );
        for bad in [
            "node:",
            "node:a b",
            "provider:n1",
            "provider:/p",
            "label:k",
            "label:=v",
            "**",
            "host:x",
            " ",
            "node:n1/x",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn levels() {
        assert_eq!(
            Selector::All.for_level(TargetLevel::Edge),
            Ok(Selector::Edge)
        );
        assert!(
            Selector::Node("n".into())
                .for_level(TargetLevel::Edge)
                .is_err()
        );
        assert!(Selector::Edge.for_level(TargetLevel::Node).is_err());
        assert_eq!(
            Selector::All.for_level(TargetLevel::Node),
            Ok(Selector::All)
        );
    }
}
