//! The fraud job's topology: BoxOffice's order events in, an alert out for every order that
//! holds seats, releases them, holds and releases again within the window — the four in a row
//! among the order's holds and releases, in event time. The `fraud_detection` example runs it
//! on a broker through [`job`], writing the traffic of [`traffic`]; tests run it through the
//! `TestDriver` and on the embedded broker.
//!
//! Contract: topic `order-events`, key the order id, value JSON
//! `{"type": ..., "order_id": ..., "show": ..., "seats": n, "at": <epoch ms>}` with the record
//! timestamp `at`; alerts to `fraud-alerts`, key the order id, value JSON
//! `{"order_id": ..., "pattern": "hold-release-hold-release", "first_at": ms, "last_at": ms}`.

use std::time::Duration;

pub mod job;
pub mod traffic;

use eddy::serde::{JsonSerde, StringSerde};
use eddy::streams::pattern::{AfterMatchSkip, Pattern, PatternMatch};
use eddy::streams::{Consumed, Materialized, Produced, StreamsBuilder, Topology, TopologyError};
use serde::{Deserialize, Serialize};

/// The topic of order events.
pub const ORDER_EVENTS: &str = "order-events";
/// The topic of alerts.
pub const FRAUD_ALERTS: &str = "fraud-alerts";
/// The name alerts give the pattern.
pub const PATTERN: &str = "hold-release-hold-release";
/// The pattern's store.
pub const STORE: &str = "hold-release";

/// What happened to an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    /// The order was placed.
    OrderPlaced,
    /// Seats were held for it.
    SeatsHeld,
    /// Its held seats were released.
    SeatsReleased,
    /// It was paid for.
    OrderConfirmed,
    /// It was cancelled.
    OrderCancelled,
}

/// One event of an order, as `order-events` carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderEvent {
    /// What happened (`type` in JSON).
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The order, also the record's key.
    pub order_id: String,
    /// The show the seats are for.
    pub show: String,
    /// How many seats.
    pub seats: u32,
    /// When it happened, in epoch milliseconds (the record's timestamp).
    pub at: i64,
}

/// An order caught holding and releasing seats twice within the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// The order, also the record's key.
    pub order_id: String,
    /// The pattern found: always [`PATTERN`].
    pub pattern: String,
    /// When the first hold was, in epoch milliseconds.
    pub first_at: i64,
    /// When the second release was.
    pub last_at: i64,
}

fn is(kind: EventType) -> impl Fn(&OrderEvent) -> bool + Send + Sync + 'static {
    move |e| e.kind == kind
}

/// Held, released, held, released: four of an order's holds and releases in a row, the
/// last less than `window` after the first; matching resumes after the fourth.
pub fn hold_release(window: Duration) -> Pattern<OrderEvent> {
    Pattern::begin_with("held", AfterMatchSkip::SkipPastLastEvent)
        .where_(is(EventType::SeatsHeld))
        .next("released")
        .where_(is(EventType::SeatsReleased))
        .next("held-again")
        .where_(is(EventType::SeatsHeld))
        .next("released-again")
        .where_(is(EventType::SeatsReleased))
        .within(window)
}

/// The alert a match raises.
pub fn alert(found: &PatternMatch<OrderEvent>) -> Alert {
    let first = found.all().next();
    Alert {
        order_id: first.map(|e| e.value.order_id.clone()).unwrap_or_default(),
        pattern: PATTERN.to_string(),
        first_at: found.first_timestamp().unwrap_or_default(),
        last_at: found.last_timestamp().unwrap_or_default(),
    }
}

/// The fraud job: order events, the holds and releases kept, the pattern per order, an alert
/// per match.
pub fn topology(window: Duration) -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    builder
        .stream(
            ORDER_EVENTS,
            Consumed::with(StringSerde, JsonSerde::<OrderEvent>::new()),
        )
        .filter(|_, e| matches!(e.kind, EventType::SeatsHeld | EventType::SeatsReleased))
        .match_pattern(hold_release(window), Materialized::named(STORE))
        .map_values(|found: PatternMatch<OrderEvent>| alert(&found))
        .to(
            FRAUD_ALERTS,
            Produced::with(StringSerde, JsonSerde::<Alert>::new()),
        );
    builder.build()
}

#[cfg(test)]
mod tests {
    use eddy::testing::TestDriver;

    use super::*;

    const MINUTE: i64 = 60_000;

    fn event(order: &str, kind: EventType, at: i64) -> OrderEvent {
        OrderEvent {
            kind,
            order_id: order.to_string(),
            show: "stadium".to_string(),
            seats: 2,
            at,
        }
    }

    /// Runs `events` through the topology with a ten-minute window; the alerts.
    fn alerts(events: &[OrderEvent]) -> Vec<(String, Alert)> {
        let driver = TestDriver::new(topology(Duration::from_secs(600)).unwrap()).unwrap();
        let input =
            driver.create_input_topic(ORDER_EVENTS, StringSerde, JsonSerde::<OrderEvent>::new());
        let output =
            driver.create_output_topic(FRAUD_ALERTS, StringSerde, JsonSerde::<Alert>::new());
        for e in events {
            input
                .pipe_input_at(e.order_id.clone(), e.clone(), e.at)
                .unwrap();
        }
        output.read_key_values_to_list()
    }

    use EventType::{OrderCancelled, OrderConfirmed, OrderPlaced, SeatsHeld, SeatsReleased};

    #[test]
    fn a_bot_holding_and_releasing_twice_is_caught_once_per_four_and_buyers_are_not() {
        let found = alerts(&[
            event("bot", OrderPlaced, 0),
            event("buyer", OrderPlaced, 1),
            event("bot", SeatsHeld, MINUTE),
            event("buyer", SeatsHeld, MINUTE + 1),
            event("bot", SeatsReleased, 2 * MINUTE),
            event("bot", OrderConfirmed, 2 * MINUTE + 5),
            event("buyer", SeatsReleased, 3 * MINUTE),
            event("bot", SeatsHeld, 3 * MINUTE),
            event("bot", SeatsReleased, 4 * MINUTE),
            event("bot", SeatsHeld, 5 * MINUTE),
            event("bot", SeatsReleased, 6 * MINUTE),
            event("bot", SeatsHeld, 7 * MINUTE),
            event("bot", SeatsReleased, 8 * MINUTE),
            event("buyer", OrderConfirmed, 9 * MINUTE),
            event("buyer", SeatsHeld, 11 * MINUTE),
            event("buyer", SeatsReleased, 12 * MINUTE),
            event("buyer", OrderCancelled, 12 * MINUTE + 1),
        ]);
        let alert = |first_at, last_at| {
            (
                "bot".to_string(),
                Alert {
                    order_id: "bot".to_string(),
                    pattern: PATTERN.to_string(),
                    first_at,
                    last_at,
                },
            )
        };
        // The buyer's second hold and release come 10 minutes after the first: no alert.
        assert_eq!(
            found,
            vec![alert(MINUTE, 4 * MINUTE), alert(5 * MINUTE, 8 * MINUTE)]
        );
    }

    #[test]
    fn four_events_exactly_the_window_apart_are_no_match_and_a_millisecond_less_is() {
        let four = |order: &str, span: i64| {
            vec![
                event(order, SeatsHeld, 0),
                event(order, SeatsReleased, 1),
                event(order, SeatsHeld, 2),
                event(order, SeatsReleased, span),
            ]
        };
        assert!(alerts(&four("o", 10 * MINUTE)).is_empty());
        let found = alerts(&four("o", 10 * MINUTE - 1));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.last_at - found[0].1.first_at, 10 * MINUTE - 1);
    }

    #[test]
    fn the_topology_is_described_as_its_snapshot() {
        let topology = topology(Duration::from_secs(600)).unwrap();
        insta::assert_snapshot!(topology.describe().to_string());
    }

    #[test]
    fn the_events_are_read_and_alerts_written_in_the_contracts_json() {
        let read: OrderEvent = serde_json::from_str(
            r#"{"type": "SeatsHeld", "order_id": "o-1", "show": "s", "seats": 2, "at": 5}"#,
        )
        .unwrap();
        assert_eq!(read, event("o-1", SeatsHeld, 5).with_show("s"));
        let written = serde_json::to_value(Alert {
            order_id: "o-1".to_string(),
            pattern: PATTERN.to_string(),
            first_at: 1,
            last_at: 2,
        })
        .unwrap();
        assert_eq!(
            written,
            serde_json::json!({"order_id": "o-1", "pattern": "hold-release-hold-release", "first_at": 1, "last_at": 2})
        );
    }

    impl OrderEvent {
        fn with_show(mut self, show: &str) -> Self {
            self.show = show.to_string();
            self
        }
    }
}
