//! A user's application of eddy, as small as one gets: orders in, the number of held seats per
//! show out, counted exactly once. Its test runs it on the embedded broker.

use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, Topology, TopologyError,
};

/// Orders as `show,seats` strings, keyed by order.
pub const ORDERS: &str = "orders";
/// The seats held for each show, keyed by show, as they change.
pub const SEATS_PER_SHOW: &str = "seats-per-show";

/// Orders regrouped by show, their seats summed.
pub fn topology() -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    builder
        .stream(ORDERS, Consumed::with(StringSerde, StringSerde))
        .filter(|_, order| order.contains(','))
        .group_by(
            |_, order| order.split(',').next().unwrap_or_default().to_string(),
            Grouped::with(StringSerde, StringSerde),
        )
        .aggregate(
            || 0i64,
            |_, order, seats| seats + seats_of(&order),
            Materialized::named("seats").with_value_serde(I64Serde),
        )
        .to_stream()
        .to(
            SEATS_PER_SHOW,
            Produced::with(StringSerde, Nullable(I64Serde)),
        );
    builder.build()
}

/// The seats an order holds: the number after its comma, none if it has none.
pub fn seats_of(order: &str) -> i64 {
    order
        .rsplit_once(',')
        .and_then(|(_, seats)| seats.trim().parse().ok())
        .unwrap_or(0)
}
