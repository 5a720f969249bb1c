//! What the `eddy` command and eddy's own test suites run, outside the library's API (as
//! Kafka Streams keeps its `internals` packages): the load generators of `eddy bench` and
//! the operator commands behind `eddy groups`, `topics`, `transactions`, `produce` and
//! `consume`. Public so that the workspace's tests and examples reach them; nothing here
//! follows the crate's semver, and any of it may change in a patch release.

pub mod bench;
pub mod tools;
