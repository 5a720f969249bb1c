//! The streams assignor: how the group's leader spreads an application's tasks over its
//! instances and their stream threads, carried in the classic consumer protocol's user data
//! so that it runs on any Kafka cluster: where each task runs ([`placement`]), what the
//! members and the leader tell each other ([`protocol`]), and the consumer-protocol
//! assignor that puts them together ([`StreamsAssignor`]).

pub(crate) mod placement;
pub(crate) mod protocol;
mod streams_assignor;

pub(crate) use streams_assignor::{LocalState, StreamsAssignor};
