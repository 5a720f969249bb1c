//! Orders joined with their payments within five minutes (`cargo run --example
//! windowed_join`): a paid order goes to `paid-orders` as soon as its payment arrives, and an
//! order left unpaid goes to `unpaid-orders` once its window has closed — once a record more
//! than five minutes later has arrived in its partition, as Kafka Streams' left join emits
//! records without a partner.

use std::path::Path;
use std::time::Duration;

use eddy::serde::{JsonSerde, StringSerde};
use eddy::streams::internals::EmitIntervals;
use eddy::streams::windows::JoinWindows;
use eddy::streams::{Consumed, Produced, StreamJoined, StreamsBuilder, Topology};
use serde::{Deserialize, Serialize};

use crate::on_broker::{self, ExampleError};

/// Orders, keyed by order id.
pub const ORDERS: &str = "orders";
/// Payments, keyed by the order id they pay.
pub const PAYMENTS: &str = "payments";
/// Orders with the payment that came within the window.
pub const PAID_ORDERS: &str = "paid-orders";
/// Orders no payment came for within the window.
pub const UNPAID_ORDERS: &str = "unpaid-orders";
/// How long after its order a payment counts.
pub const PAYMENT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// An order placed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The order, also the record's key.
    pub order_id: String,
    /// What it costs.
    pub total_cents: u64,
    /// When it was placed, in epoch milliseconds (the record's timestamp).
    pub at: i64,
}

/// A payment for an order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// The order paid, also the record's key.
    pub order_id: String,
    /// How much.
    pub amount_cents: u64,
    /// When it was made, in epoch milliseconds (the record's timestamp).
    pub at: i64,
}

/// An order and the payment that settled it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaidOrder {
    /// The order.
    pub order_id: String,
    /// What it cost.
    pub total_cents: u64,
    /// What was paid.
    pub paid_cents: u64,
    /// How long after the order the payment came.
    pub paid_after_ms: i64,
}

/// The join's result: the order and its payment, if one came in time.
#[derive(Clone, Debug)]
struct Settlement {
    order: Order,
    payment: Option<Payment>,
}

/// Orders left-joined with the payments up to five minutes after them, split into paid and
/// unpaid.
pub fn topology() -> Result<Topology, ExampleError> {
    let builder = StreamsBuilder::new();
    let orders = builder.stream(
        ORDERS,
        Consumed::with(StringSerde, JsonSerde::<Order>::new()),
    );
    let payments = builder.stream(
        PAYMENTS,
        Consumed::with(StringSerde, JsonSerde::<Payment>::new()),
    );
    let window =
        JoinWindows::of_time_difference_with_no_grace(PAYMENT_WINDOW)?.before(Duration::ZERO)?;
    let settled = orders.left_join(
        payments,
        |order: &Order, payment: Option<&Payment>| Settlement {
            order: order.clone(),
            payment: payment.cloned(),
        },
        window,
        StreamJoined::with(
            StringSerde,
            JsonSerde::<Order>::new(),
            JsonSerde::<Payment>::new(),
        )
        .with_store_name("orders-payments"),
    );
    settled
        .clone()
        .filter(|_, s| s.payment.is_some())
        .map_values(|s: Settlement| {
            let payment = s.payment.unwrap_or_else(|| unreachable!("filtered"));
            PaidOrder {
                order_id: s.order.order_id,
                total_cents: s.order.total_cents,
                paid_cents: payment.amount_cents,
                paid_after_ms: payment.at - s.order.at,
            }
        })
        .to(
            PAID_ORDERS,
            Produced::with(StringSerde, JsonSerde::<PaidOrder>::new()),
        );
    settled
        .filter(|_, s| s.payment.is_none())
        .map_values(|s: Settlement| s.order)
        .to(
            UNPAID_ORDERS,
            Produced::with(StringSerde, JsonSerde::<Order>::new()),
        );
    Ok(builder.build()?)
}

/// An evening's orders from `start`, one every 45 seconds: seven in ten paid within the
/// window, one in ten paid too late, two never; then, an hour and a half after the start,
/// eight more, each paid a minute later — the records that close the earlier orders'
/// windows. Each list is in time order, as the services writing them would write them: a
/// payment written out of order could arrive after later records had closed its order's
/// window, and the order would be reported unpaid as well as paid.
pub fn evening(orders: u32, start: i64) -> (Vec<Order>, Vec<Payment>) {
    let mut placed = Vec::new();
    let mut paid = Vec::new();
    let late = (0..8).map(|i| (format!("late-{i}"), start + 90 * 60_000 + i64::from(i)));
    let early = (0..orders).map(|i| (format!("order-{i:04}"), start + i64::from(i) * 45_000));
    for (n, (order_id, at)) in early.chain(late).enumerate() {
        let total_cents = 2_500 + (n as u64 * 7_919) % 20_000;
        let after = match n % 10 {
            _ if order_id.starts_with("late") => Some(60_000),
            0..=6 => Some(20_000 + (n as i64 * 37_000) % 270_000),
            7 => Some(6 * 60_000 + (n as i64 * 11_000) % 180_000),
            _ => None,
        };
        if let Some(after) = after {
            paid.push(Payment {
                order_id: order_id.clone(),
                amount_cents: total_cents,
                at: at + after,
            });
        }
        placed.push(Order {
            order_id,
            total_cents,
            at,
        });
    }
    // Payments come in the order they are made, as orders do.
    paid.sort_by_key(|p| p.at);
    (placed, paid)
}

/// Writes `orders` and `payments`, runs the join on the broker until its input is done, and
/// reads back what it wrote: the paid orders and the unpaid ones.
pub async fn run(
    bootstrap: &str,
    orders: &[Order],
    payments: &[Payment],
    state_dir: &Path,
) -> Result<(Vec<PaidOrder>, Vec<Order>), ExampleError> {
    let topics = [ORDERS, PAYMENTS, PAID_ORDERS, UNPAID_ORDERS].map(|t| (t, 2));
    on_broker::create_topics(bootstrap, &topics).await?;
    let keyed_orders = orders.iter().map(|o| (o.order_id.clone(), o, o.at));
    on_broker::write_json(bootstrap, ORDERS, keyed_orders).await?;
    let keyed_payments = payments.iter().map(|p| (p.order_id.clone(), p, p.at));
    on_broker::write_json(bootstrap, PAYMENTS, keyed_payments).await?;
    // Kafka Streams looks for orders left without a payment at most once a second of wall-clock
    // time (an internal setting); this evening arrives in well under a second, so it looks at
    // every record.
    let settings = [(EmitIntervals::OUTER_JOIN_KEY, "0")];
    let inputs = [ORDERS, PAYMENTS];
    let app = "windowed-join";
    on_broker::run_until_idle(topology()?, app, bootstrap, &inputs, state_dir, &settings).await?;
    Ok((
        on_broker::read_json(bootstrap, PAID_ORDERS).await?,
        on_broker::read_json(bootstrap, UNPAID_ORDERS).await?,
    ))
}

#[cfg(test)]
mod tests {
    use eddy::testing::TestDriver;

    use super::*;

    #[test]
    fn the_topology_and_its_outputs_are_as_their_snapshots() {
        let topology = topology().unwrap();
        insta::assert_snapshot!("windowed_join_topology", topology.describe().to_string());
        let driver = TestDriver::new(topology).unwrap();
        let orders_in = driver.create_input_topic(ORDERS, StringSerde, JsonSerde::<Order>::new());
        let payments_in =
            driver.create_input_topic(PAYMENTS, StringSerde, JsonSerde::<Payment>::new());
        let (orders, payments) = evening(12, 0);
        let mut events: Vec<(i64, Result<Order, Payment>)> = orders
            .into_iter()
            .map(|o| (o.at, Ok(o)))
            .chain(payments.into_iter().map(|p| (p.at, Err(p))))
            .collect();
        events.sort_by_key(|(at, _)| *at);
        let mut log = Vec::new();
        let paid_out =
            driver.create_output_topic(PAID_ORDERS, StringSerde, JsonSerde::<PaidOrder>::new());
        let unpaid_out =
            driver.create_output_topic(UNPAID_ORDERS, StringSerde, JsonSerde::<Order>::new());
        for (at, event) in events {
            match event {
                Ok(o) => orders_in.pipe_input_at(o.order_id.clone(), o, at).unwrap(),
                Err(p) => payments_in
                    .pipe_input_at(p.order_id.clone(), p, at)
                    .unwrap(),
            }
            for (_, p) in paid_out.read_key_values_to_list() {
                log.push(format!("{:>7.1} min  paid    {p:?}", at as f64 / 60_000.0));
            }
            for (_, o) in unpaid_out.read_key_values_to_list() {
                log.push(format!("{:>7.1} min  unpaid  {o:?}", at as f64 / 60_000.0));
            }
        }
        insta::assert_snapshot!("windowed_join_output", log.join("\n"));
    }
}
