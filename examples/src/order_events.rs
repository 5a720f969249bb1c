//! The seed story of BoxOffice's log (`cargo run --example order_events`): a keyed producer
//! writes a day's order events; a `notification` group of three consumers and an `analytics`
//! group of one read the same topic at their own pace; a seventh notification consumer on six
//! partitions sits idle; the warehouse loader replays everything from offset 0; the search
//! team, after a fix, re-reads a two-hour window by resetting its group's offsets by time; and
//! each group's lag is printed as `eddy groups describe` prints it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy::client::{Admin, Consumer, ConsumerConfig, GroupState, OffsetReset, OffsetSpec};
use eddy::internals::tools::groups::{self, ResetTarget};

use crate::fraud::{EventType, OrderEvent, ORDER_EVENTS};
use crate::on_broker::{self, ExampleError};

/// Partitions of `order-events`.
pub const PARTITIONS: i32 = 6;
/// An hour in milliseconds.
pub const HOUR: i64 = 3_600_000;

/// A day of `orders` orders spread over six hours from `start`: each placed, its seats held
/// half a minute later and paid for after two; in time order.
pub fn day(orders: u32, start: i64) -> Vec<OrderEvent> {
    let every = 6 * HOUR / i64::from(orders.max(1));
    let mut events: Vec<OrderEvent> = (0..orders)
        .flat_map(|i| {
            let at = start + i64::from(i) * every;
            [
                (EventType::OrderPlaced, at),
                (EventType::SeatsHeld, at + 30_000),
                (EventType::OrderConfirmed, at + 120_000),
            ]
            .map(|(kind, at)| OrderEvent {
                kind,
                order_id: format!("order-{i:05}"),
                show: "stadium-2027-06-12".to_string(),
                seats: 2,
                at,
            })
        })
        .collect();
    events.sort_by_key(|e| e.at);
    events
}

/// Writes `events` to `order-events`, keyed by order, stamped with their time.
pub async fn produce(bootstrap: &str, events: &[OrderEvent]) -> Result<u64, ExampleError> {
    on_broker::create_topics(bootstrap, &[(ORDER_EVENTS, PARTITIONS)]).await?;
    let keyed = events.iter().map(|e| (e.order_id.clone(), e, e.at));
    on_broker::write_json(bootstrap, ORDER_EVENTS, keyed).await
}

/// What a group's consumers did together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// How many partitions each member held once all had joined, largest first.
    pub partitions_per_member: Vec<usize>,
    /// Records read with a timestamp before the reading's `before`.
    pub read: u64,
}

/// How a group reads.
#[derive(Debug, Clone, Copy)]
pub struct GroupRead<'a> {
    /// The group.
    pub group: &'a str,
    /// How many consumers it runs.
    pub members: usize,
    /// Where a consumer starts without a committed offset.
    pub reset: OffsetReset,
    /// The group's committed offsets, summed over the partitions, at which it stops.
    pub stop_at: i64,
    /// Records at or after this time are not counted.
    pub before: i64,
    /// Records a poll returns at most.
    pub max_poll_records: usize,
    /// How long a consumer takes over what a poll returned: the group's pace.
    pub pace: Duration,
}

/// Runs `read.members` consumers of `read.group` on `order-events`, each committing what it
/// polls, until all have joined and the group's committed offsets reach `read.stop_at`.
pub async fn read_as_group(bootstrap: &str, read: GroupRead<'_>) -> Result<Reading, ExampleError> {
    let done = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicU64::new(0));
    let mut members = Vec::new();
    for i in 0..read.members {
        let mut consumer = Consumer::new(
            ConsumerConfig::new(bootstrap)
                .group_id(read.group)
                .client_id(format!("{}-{}", read.group, i + 1))
                .auto_offset_reset(read.reset)
                .max_poll_records(read.max_poll_records),
        )?;
        consumer.subscribe(&[ORDER_EVENTS])?;
        let (done, counted, before, pace) = (done.clone(), counted.clone(), read.before, read.pace);
        members.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let records = consumer.poll(Duration::from_millis(50)).await?;
                let wanted = records.iter().filter(|r| r.timestamp < before).count();
                counted.fetch_add(wanted as u64, Ordering::Relaxed);
                if !records.is_empty() {
                    tokio::time::sleep(pace).await;
                    consumer.commit_positions().await?;
                }
            }
            consumer.close().await
        }));
    }
    let admin = Admin::connect(bootstrap).await?;
    let partitions_per_member = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let group = admin.describe_group(read.group).await?;
        let committed: i64 = admin.committed_offsets(read.group).await?.values().sum();
        let assigned: usize = group.members.iter().map(|m| m.assignment.len()).sum();
        let settled = group.state == GroupState::Stable
            && group.members.len() == read.members
            && assigned == usize::try_from(PARTITIONS).unwrap_or(0);
        if settled && committed >= read.stop_at {
            let mut held: Vec<usize> = group.members.iter().map(|m| m.assignment.len()).collect();
            held.sort_unstable_by(|a, b| b.cmp(a));
            break held;
        }
    };
    done.store(true, Ordering::Relaxed);
    for member in members {
        member
            .await
            .map_err(|e| ExampleError::Serde(format!("a consumer failed: {e}")))??;
    }
    Ok(Reading {
        partitions_per_member,
        read: counted.load(Ordering::Relaxed),
    })
}

/// The sum of the offsets of the first records at or after `at` in every partition (the
/// end where none is).
pub async fn offsets_at(admin: &Admin, at: i64) -> Result<i64, ExampleError> {
    let partitions = on_broker::partitions(admin, ORDER_EVENTS).await?;
    let offsets = admin
        .list_offsets(&partitions, OffsetSpec::Timestamp(at))
        .await?;
    Ok(offsets.values().sum())
}

/// Resets `group`'s offsets on `order-events` to the first records at or after `at`, as
/// `eddy groups reset-offsets --to-datetime` does; the table of new offsets.
pub async fn reset_to_time(admin: &Admin, group: &str, at: i64) -> Result<String, ExampleError> {
    groups::reset_offsets(admin, group, ORDER_EVENTS, ResetTarget::Datetime(at), true)
        .await
        .map_err(ExampleError::from)
}

/// What the story's groups did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    /// Events written.
    pub written: u64,
    /// The notification group of three.
    pub notification: Reading,
    /// The analytics group, at its own pace.
    pub analytics: Reading,
    /// The notification group grown to seven.
    pub notification_of_seven: Reading,
    /// The warehouse loader's replay.
    pub warehouse: Reading,
    /// The search team's two hours.
    pub search: Reading,
    /// The events in the search team's window.
    pub search_window_events: u64,
}

/// Tells the story on the broker at `bootstrap` with a day of `orders` orders from `start`,
/// handing `say` what to print.
pub async fn story(
    bootstrap: &str,
    orders: u32,
    start: i64,
    say: &mut dyn FnMut(String),
) -> Result<Story, ExampleError> {
    let events = day(orders, start);
    let written = produce(bootstrap, &events).await?;
    let total = i64::try_from(written).unwrap_or(i64::MAX);
    say(format!(
        "producer: {written} order events over six hours to {ORDER_EVENTS}, {PARTITIONS} \
         partitions, keyed by order id: every event of an order in one partition, in order"
    ));
    let admin = Admin::connect(bootstrap).await?;
    let all = |group, members| GroupRead {
        group,
        members,
        reset: OffsetReset::Earliest,
        stop_at: total,
        before: i64::MAX,
        max_poll_records: 500,
        pace: Duration::ZERO,
    };

    let notification = read_as_group(bootstrap, all("notification", 3)).await?;
    say(format!(
        "notification: 3 consumers, partitions each {:?}, {} events read",
        notification.partitions_per_member, notification.read
    ));
    let analytics = read_as_group(
        bootstrap,
        GroupRead {
            stop_at: total / 2,
            max_poll_records: 50,
            pace: Duration::from_millis(20),
            ..all("analytics", 1)
        },
    )
    .await?;
    say(format!(
        "analytics: 1 consumer at its own pace, {} events read so far",
        analytics.read
    ));
    for group in ["notification", "analytics"] {
        say(describe(&admin, group).await?);
    }

    let notification_of_seven = read_as_group(bootstrap, all("notification", 7)).await?;
    say(format!(
        "notification grown to 7 consumers on {PARTITIONS} partitions: partitions each {:?}",
        notification_of_seven.partitions_per_member
    ));

    let warehouse = read_as_group(bootstrap, all("warehouse", 1)).await?;
    say(format!(
        "warehouse loader: a new group from offset 0, {} events replayed",
        warehouse.read
    ));

    let (from, to) = (start + 2 * HOUR, start + 4 * HOUR);
    say(
        "search: after a fix, hours 2 to 4 of the day again, its group's offsets reset by time"
            .to_string(),
    );
    say(reset_to_time(&admin, "search", from).await?);
    let search = read_as_group(
        bootstrap,
        GroupRead {
            reset: OffsetReset::Latest,
            stop_at: offsets_at(&admin, to).await?,
            before: to,
            ..all("search", 1)
        },
    )
    .await?;
    let search_window_events = events.iter().filter(|e| (from..to).contains(&e.at)).count() as u64;
    say(format!(
        "search: {} events of the window read again ({search_window_events} in it)",
        search.read
    ));
    for group in ["analytics", "warehouse", "search"] {
        say(describe(&admin, group).await?);
    }
    Ok(Story {
        written,
        notification,
        analytics,
        notification_of_seven,
        warehouse,
        search,
        search_window_events,
    })
}

/// `eddy groups describe GROUP`'s table.
pub async fn describe(admin: &Admin, group: &str) -> Result<String, ExampleError> {
    Ok(groups::describe(admin, group).await?)
}
