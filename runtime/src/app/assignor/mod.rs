//! The streams assignor: how the group's leader spreads an application's tasks over its
//! instances and their stream threads, carried in the classic consumer protocol's user data
//! so that it runs on any Kafka cluster. So far where each task runs ([`placement`]).

pub mod placement;
