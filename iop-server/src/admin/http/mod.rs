//! HTTP and auth: the route table (`routes`, [`router`](super::router)), who may call
//! what and from where ([`access`], [`tokens`]), the typed errors every route answers
//! with ([`error`]), and the listeners, plain or TLS ([`serve`]).

pub mod access;
pub mod error;
pub(super) mod routes;
pub mod serve;
pub mod tokens;
