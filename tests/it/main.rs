//! eddy's end-to-end tests across crates, one module per feature, linked once as one test
//! binary: the client against a real broker (embedded, or the one `EDDY_TEST_BOOTSTRAP`
//! names), the broker's storage and coordinators under faults and hostile input, and streams
//! applications with their snapshots and reference catalogs. A module's tests run alone with
//! `cargo test -p eddy-tests --test it -- MODULE::`.

mod cep_catalog;
mod cep_properties;
mod client_admin;
mod client_consumer;
mod client_groups;
mod client_producer;
mod client_transactions;
mod compaction;
mod failed_fsync;
mod forged_coordinator_state;
mod group_protocol;
mod groups_tool;
mod pattern_snapshots;
mod paused_time;
mod produce_and_fetch;
mod produce_validation;
mod request_bounds;
mod slow_disk;
mod streams_app;
mod streams_catalog;
mod streams_commits;
mod streams_errors;
mod streams_latency;
mod streams_patterns;
mod streams_properties;
mod streams_queries;
mod streams_semantics;
mod streams_snapshots;
mod streams_topics;
mod transactions;
mod wire_bad_input;
