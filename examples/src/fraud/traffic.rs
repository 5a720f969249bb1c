//! BoxOffice's order traffic for the fraud job, with bots planted among the buyers: a
//! [`Plan`] of every event in event-time order, drawn from a seed so that the same settings
//! give the same traffic, and the bots it planted, so that a run can be checked.
//!
//! A normal buyer never holds, releases, holds and releases again within the window, though
//! some come close: one changes their mind once (held, released, held, then pays), one gives
//! up (held, released, cancelled), and one dithers through all four but takes the window or
//! longer to do it — sometimes exactly the window, which is no match. Every bot goes through
//! the four within the window, sometimes a second short of it, some holding once more before
//! they cancel: each raises one alert.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;

use super::{EventType, OrderEvent};

/// The shows on sale; the first takes most of the traffic.
const SHOWS: [&str; 4] = [
    "stadium-2027-06-12",
    "arena-2027-03-04",
    "theatre-2027-01-20",
    "club-2027-02-14",
];

/// Simulated time between two orders' first events: 50 orders a second.
const ORDER_EVERY_MS: i64 = 20;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    /// Orders, bots among them.
    pub orders: u32,
    /// Orders placed by bots.
    pub bots: u32,
    /// The fraud rule's window: normal buyers stay out of it, bots inside.
    pub window: Duration,
    /// The seed every choice is drawn from.
    pub seed: u64,
    /// When the first order is placed, in epoch milliseconds.
    pub start_at: i64,
}

impl Traffic {
    /// How long the traffic lasts in event time, from the first event to the last at most.
    pub fn span(&self) -> Duration {
        let placing = u64::from(self.orders).saturating_mul(ORDER_EVERY_MS.unsigned_abs());
        Duration::from_millis(placing) + self.window * 2 + Duration::from_secs(600)
    }

    /// This traffic starting a [`Traffic::span`] before now, so that every event lies in the
    /// past: brokers refuse timestamps far in the future, and retention deletes old ones.
    pub fn ending_now(self) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let start = now.saturating_sub(self.span().as_millis());
        Self {
            start_at: i64::try_from(start).unwrap_or(0),
            ..self
        }
    }
}

/// One planned event: its order by number, so that a plan of a million events stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// When it happens, in epoch milliseconds.
    pub at: i64,
    /// The order's number.
    pub order: u32,
    /// What happens.
    pub kind: EventType,
}

/// A run's traffic: every event in event-time order and the orders that are bots.
#[derive(Debug, Clone)]
pub struct Plan {
    events: Vec<Planned>,
    bots: BTreeSet<u32>,
    shows: Vec<u8>,
    seats: Vec<u8>,
}

/// Why traffic cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// More bots than orders.
    #[error("{bots} bots cannot be planted among {orders} orders")]
    TooManyBots {
        /// Bots asked for.
        bots: u32,
        /// Orders asked for.
        orders: u32,
    },
    /// A window under ten seconds leaves no room between a bot's events.
    #[error("the window must be at least ten seconds, not {0:?}")]
    WindowTooShort(Duration),
}

/// The id of order number `order`: the record's key and the events' `order_id`.
pub fn order_id(order: u32) -> String {
    format!("order-{order:06}")
}

impl Plan {
    /// Draws the traffic `traffic` describes.
    pub fn new(traffic: &Traffic) -> Result<Self, PlanError> {
        if traffic.bots > traffic.orders {
            return Err(PlanError::TooManyBots {
                bots: traffic.bots,
                orders: traffic.orders,
            });
        }
        let window = i64::try_from(traffic.window.as_millis()).unwrap_or(i64::MAX / 4);
        if window < 10_000 {
            return Err(PlanError::WindowTooShort(traffic.window));
        }
        let mut rng = XorShiftRng::seed_from_u64(traffic.seed);
        let orders = usize::try_from(traffic.orders).unwrap_or(usize::MAX);
        let bots: BTreeSet<u32> = rand::seq::index::sample(&mut rng, orders, bots_len(traffic))
            .into_iter()
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        let mut plan = Plan {
            events: Vec::with_capacity(orders.saturating_mul(5)),
            bots,
            shows: Vec::with_capacity(orders),
            seats: Vec::with_capacity(orders),
        };
        let mut at = traffic.start_at;
        for order in 0..traffic.orders {
            at += rng.random_range(0..=2 * ORDER_EVERY_MS);
            // Six in ten orders are for the stadium show.
            let show = if rng.random_bool(0.6) {
                0
            } else {
                rng.random_range(1..SHOWS.len())
            };
            plan.shows.push(u8::try_from(show).unwrap_or(0));
            let seats = if plan.bots.contains(&order) {
                rng.random_range(4..=8)
            } else {
                rng.random_range(1..=4)
            };
            plan.seats.push(seats);
            let kinds_and_gaps = if plan.bots.contains(&order) {
                bot(&mut rng, window)
            } else {
                buyer(&mut rng, window)
            };
            let mut t = at;
            for (kind, gap) in kinds_and_gaps {
                t += gap;
                plan.events.push(Planned { at: t, order, kind });
            }
        }
        // An order's events are apart in time, so this keeps them in the order they happen.
        plan.events.sort_unstable_by_key(|e| (e.at, e.order));
        Ok(plan)
    }

    /// Every event, in event-time order (an order's own in the order they happen).
    pub fn events(&self) -> &[Planned] {
        &self.events
    }

    /// The orders that are bots, by id.
    pub fn bots(&self) -> BTreeSet<String> {
        self.bots.iter().map(|&o| order_id(o)).collect()
    }

    /// The event `planned` is, as `order-events` carries it.
    pub fn event(&self, planned: &Planned) -> OrderEvent {
        let i = usize::try_from(planned.order).unwrap_or(usize::MAX);
        let show = self.shows.get(i).map_or(0, |&s| usize::from(s));
        OrderEvent {
            kind: planned.kind,
            order_id: order_id(planned.order),
            show: SHOWS[show.min(SHOWS.len() - 1)].to_string(),
            seats: self.seats.get(i).map_or(1, |&s| u32::from(s)),
            at: planned.at,
        }
    }
}

fn bots_len(traffic: &Traffic) -> usize {
    usize::try_from(traffic.bots).unwrap_or(usize::MAX)
}

use EventType::{OrderCancelled, OrderConfirmed, OrderPlaced, SeatsHeld, SeatsReleased};

/// A normal buyer's events, each with the time since the one before.
fn buyer(rng: &mut XorShiftRng, window: i64) -> Vec<(EventType, i64)> {
    let choice = rng.random_range(0..100);
    let kinds: &[EventType] = match choice {
        // Holds seats and pays.
        0..70 => &[OrderPlaced, SeatsHeld, OrderConfirmed],
        // Changes their mind once, then pays: three of the four.
        70..85 => &[
            OrderPlaced,
            SeatsHeld,
            SeatsReleased,
            SeatsHeld,
            OrderConfirmed,
        ],
        // Gives up.
        85..95 => &[OrderPlaced, SeatsHeld, SeatsReleased, OrderCancelled],
        // Dithers through all four, over the window or longer.
        _ => {
            let span = if rng.random_bool(0.2) {
                window
            } else {
                window + rng.random_range(1_000..=600_000)
            };
            let mut dithering = four(rng, span);
            dithering.insert(0, (OrderPlaced, 0));
            dithering.push((OrderCancelled, step(rng)));
            return dithering;
        }
    };
    kinds
        .iter()
        .enumerate()
        .map(|(i, &kind)| (kind, if i == 0 { 0 } else { step(rng) }))
        .collect()
}

/// A buyer's time between two steps: two seconds to a minute and a half.
fn step(rng: &mut XorShiftRng) -> i64 {
    rng.random_range(2_000..=90_000)
}

/// A bot's events: the four within the window, sometimes one more hold, then it cancels.
fn bot(rng: &mut XorShiftRng, window: i64) -> Vec<(EventType, i64)> {
    let span = if rng.random_bool(0.1) {
        window - 1_000
    } else {
        rng.random_range(3_000..=window - 1_000)
    };
    let mut events = four(rng, span);
    events.insert(0, (OrderPlaced, 0));
    if rng.random_bool(0.3) {
        events.push((SeatsHeld, rng.random_range(1_000..=30_000)));
    }
    events.push((OrderCancelled, rng.random_range(1_000..=30_000)));
    events
}

/// Held, released, held, released, the last `span` after the first (`span` at least 3 ms):
/// the first with a short gap of its own, the three after it splitting `span`, none empty.
fn four(rng: &mut XorShiftRng, span: i64) -> Vec<(EventType, i64)> {
    let first = rng.random_range(1..=span - 2);
    let second = rng.random_range(first + 1..=span - 1);
    vec![
        (SeatsHeld, rng.random_range(1_000..=10_000)),
        (SeatsReleased, first),
        (SeatsHeld, second - first),
        (SeatsReleased, span - second),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn traffic(orders: u32, bots: u32, seed: u64) -> Traffic {
        Traffic {
            orders,
            bots,
            window: Duration::from_secs(600),
            seed,
            start_at: 1_700_000_000_000,
        }
    }

    /// The rule, by brute force over each order's holds and releases: the orders it alerts,
    /// with how many times.
    fn alerted(plan: &Plan, window: i64) -> BTreeMap<String, usize> {
        let mut by_order: BTreeMap<u32, Vec<&Planned>> = BTreeMap::new();
        for e in plan.events() {
            if matches!(e.kind, SeatsHeld | SeatsReleased) {
                by_order.entry(e.order).or_default().push(e);
            }
        }
        let want = [SeatsHeld, SeatsReleased, SeatsHeld, SeatsReleased];
        let mut found = BTreeMap::new();
        for (order, events) in by_order {
            let mut i = 0;
            while i + 4 <= events.len() {
                let four = &events[i..i + 4];
                let kinds_match = four.iter().zip(want).all(|(e, k)| e.kind == k);
                if kinds_match && four[3].at - four[0].at < window {
                    *found.entry(order_id(order)).or_insert(0) += 1;
                    i += 4;
                } else {
                    i += 1;
                }
            }
        }
        found
    }

    #[test]
    fn the_rule_alerts_every_bot_once_and_no_buyer() {
        for seed in 0..20 {
            let plan = Plan::new(&traffic(2_000, 40, seed)).unwrap();
            let found = alerted(&plan, 600_000);
            assert_eq!(
                found.keys().cloned().collect::<BTreeSet<_>>(),
                plan.bots(),
                "seed {seed}"
            );
            assert!(found.values().all(|&n| n == 1), "seed {seed}: {found:?}");
        }
    }

    #[test]
    fn events_come_in_event_time_order_and_the_same_seed_gives_the_same_traffic() {
        let plan = Plan::new(&traffic(1_000, 10, 7)).unwrap();
        assert!(plan.events().windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(
            plan.events(),
            Plan::new(&traffic(1_000, 10, 7)).unwrap().events()
        );
        assert_ne!(
            plan.events(),
            Plan::new(&traffic(1_000, 10, 8)).unwrap().events()
        );
        let span = i64::try_from(traffic(1_000, 10, 7).span().as_millis()).unwrap();
        let last = plan.events().last().unwrap().at;
        assert!(last < 1_700_000_000_000 + span, "{last}");
    }

    #[test]
    fn near_misses_are_planted_on_both_sides_of_the_window() {
        let plan = Plan::new(&traffic(5_000, 100, 3)).unwrap();
        let mut spans: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
        for e in plan.events() {
            if matches!(e.kind, SeatsHeld | SeatsReleased) {
                spans.entry(e.order).or_default().push(e.at);
            }
        }
        let four_spans: Vec<(bool, i64)> = spans
            .iter()
            .filter(|(_, at)| at.len() >= 4)
            .map(|(o, at)| (plan.bots.contains(o), at[3] - at[0]))
            .collect();
        assert!(
            four_spans.contains(&(false, 600_000)),
            "a buyer exactly the window long"
        );
        assert!(
            four_spans.contains(&(true, 599_000)),
            "a bot a second short of it"
        );
        assert!(four_spans
            .iter()
            .all(|&(bot, span)| bot == (span < 600_000)));
    }

    #[test]
    fn impossible_traffic_is_refused() {
        assert_eq!(
            Plan::new(&traffic(3, 4, 0)).unwrap_err(),
            PlanError::TooManyBots { bots: 4, orders: 3 }
        );
        let mut short = traffic(3, 1, 0);
        short.window = Duration::from_millis(9_999);
        assert!(matches!(
            Plan::new(&short),
            Err(PlanError::WindowTooShort(_))
        ));
    }
}
