//! The Edges and the fleet: the list of Edges and one Edge's view ([`edges`]), across
//! replicas ([`listing`]); the fleet's load and history ([`load`]); the event stream
//! ([`events`]); the router's placement ([`placement`]) and watch of the load
//! ([`watch`]); and their JSON, written in one
//! place from the typed forms ([`json`]).

pub(super) mod edges;
pub(super) mod events;
pub(super) mod json;
pub(super) mod listing;
pub(super) mod load;
pub(super) mod placement;
pub(super) mod watch;
