//! Topologies the application's unit tests share.

use std::time::Duration;

use eddy_core::serde::StringSerde;
use eddy_core::streams::windows::JoinWindows;
use eddy_core::streams::{Consumed, KStream, StreamJoined, StreamsBuilder};

/// The topics `orders` and `payments` joined within 5 s: inputs that must be co-partitioned.
pub(crate) fn orders_joined_with_payments(builder: &StreamsBuilder) -> KStream<String, String> {
    let strings = || Consumed::with(StringSerde, StringSerde);
    let windows = JoinWindows::of_time_difference_with_no_grace(Duration::from_secs(5))
        .expect("a join window");
    builder.stream("orders", strings()).join(
        builder.stream("payments", strings()),
        |o: &String, p: &String| format!("{o}{p}"),
        windows,
        StreamJoined::with(StringSerde, StringSerde, StringSerde),
    )
}
