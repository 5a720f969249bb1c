//! Keys decide the partition (`cargo run --example partition_skew`): one minute of an
//! on-sale, six in ten orders for one stadium show, written to twelve partitions keyed by
//! order id and then keyed by show. The producer puts a key in partition
//! `murmur2(key) mod 12`, as Kafka's Java client does, so keyed by order the minute spreads
//! evenly, and keyed by show the stadium's partition takes the stadium's share — one
//! consumer of twelve does most of the work. The charts are drawn from the offsets the
//! broker reports and checked against murmur2.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use eddy::app::grouped;
use eddy::client::{Admin, OffsetSpec};
use eddy::log::partition_for_key;
use rand::{RngExt, SeedableRng};
use rand_xorshift::XorShiftRng;

use crate::on_broker::{self, ExampleError};

/// Partitions of both topics.
pub const PARTITIONS: i32 = 12;
/// The minute keyed by order id.
pub const BY_ORDER: &str = "on-sale-by-order";
/// The minute keyed by show.
pub const BY_SHOW: &str = "on-sale-by-show";
/// The show most buyers want.
pub const STADIUM: &str = "stadium-2027-06-12";
/// The other shows on sale.
const OTHER_SHOWS: [&str; 9] = [
    "arena-2027-03-04",
    "arena-2027-03-05",
    "theatre-2027-01-20",
    "theatre-2027-01-21",
    "club-2027-02-14",
    "club-2027-02-15",
    "hall-2027-04-01",
    "hall-2027-04-02",
    "park-2027-07-30",
];

/// One order of the minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sale {
    /// The order.
    pub order_id: String,
    /// The show.
    pub show: &'static str,
    /// When, in epoch milliseconds.
    pub at: i64,
}

/// `orders` orders over the minute from `start`, six in ten for the stadium.
pub fn on_sale_minute(orders: u32, start: i64, seed: u64) -> Vec<Sale> {
    let mut rng = XorShiftRng::seed_from_u64(seed);
    (0..orders)
        .map(|i| Sale {
            order_id: format!("order-{i:06}"),
            show: if rng.random_bool(0.6) {
                STADIUM
            } else {
                OTHER_SHOWS[rng.random_range(0..OTHER_SHOWS.len())]
            },
            at: start + i64::from(i) * 60_000 / i64::from(orders.max(1)),
        })
        .collect()
}

/// How many of `keys` murmur2 puts in each of `partitions` partitions.
pub fn by_murmur2<'a>(keys: impl IntoIterator<Item = &'a str>, partitions: i32) -> Vec<u64> {
    let mut counts = vec![0; usize::try_from(partitions).unwrap_or(0)];
    for key in keys {
        let p = partition_for_key(key.as_bytes(), partitions);
        if let Some(count) = usize::try_from(p).ok().and_then(|p| counts.get_mut(p)) {
            *count += 1;
        }
    }
    counts
}

/// A bar per partition, the longest `width` wide, with its count and share; `labels` name
/// what some partitions hold.
pub fn chart(title: &str, counts: &[u64], labels: &BTreeMap<usize, String>) -> String {
    const WIDTH: u64 = 48;
    let total: u64 = counts.iter().sum();
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    let mut out = format!("{title}: {} records\n", grouped(total));
    for (p, &count) in counts.iter().enumerate() {
        let bar = usize::try_from(count * WIDTH / most).unwrap_or(0);
        let share = count as f64 * 100.0 / total.max(1) as f64;
        let _ = write!(
            out,
            "p{p:<3}{:<48} {:>6} {share:>5.1}%",
            "█".repeat(bar),
            grouped(count)
        );
        if let Some(label) = labels.get(&p) {
            let _ = write!(out, "  {label}");
        }
        out.push('\n');
    }
    out
}

/// What the minute looks like in each topic, as the broker holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skew {
    /// Records per partition keyed by order id.
    pub by_order: Vec<u64>,
    /// Records per partition keyed by show.
    pub by_show: Vec<u64>,
}

/// Writes `sales` to both topics and counts each partition's records from its end offset.
pub async fn run(bootstrap: &str, sales: &[Sale]) -> Result<Skew, ExampleError> {
    on_broker::create_topics(bootstrap, &[(BY_ORDER, PARTITIONS), (BY_SHOW, PARTITIONS)]).await?;
    let by_order = sales.iter().map(|s| (s.order_id.clone(), s.show, s.at));
    on_broker::write(bootstrap, BY_ORDER, by_order).await?;
    let by_show = sales
        .iter()
        .map(|s| (s.show.to_string(), s.order_id.clone(), s.at));
    on_broker::write(bootstrap, BY_SHOW, by_show).await?;
    let admin = Admin::connect(bootstrap).await?;
    let mut counts = Vec::new();
    for topic in [BY_ORDER, BY_SHOW] {
        let partitions = on_broker::partitions(&admin, topic).await?;
        let ends = admin.list_offsets(&partitions, OffsetSpec::Latest).await?;
        counts.push(
            ends.values()
                .map(|&end| u64::try_from(end).unwrap_or(0))
                .collect::<Vec<_>>(),
        );
    }
    let by_show = counts.pop().unwrap_or_default();
    let by_order = counts.pop().unwrap_or_default();
    Ok(Skew { by_order, by_show })
}

/// Which shows each partition holds, keyed by show.
pub fn shows_by_partition() -> BTreeMap<usize, String> {
    let mut labels: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for show in std::iter::once(STADIUM).chain(OTHER_SHOWS) {
        let p = partition_for_key(show.as_bytes(), PARTITIONS);
        labels
            .entry(usize::try_from(p).unwrap_or(0))
            .or_default()
            .push(show);
    }
    labels
        .into_iter()
        .map(|(p, shows)| (p, shows.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_are_as_their_snapshot() {
        let sales = on_sale_minute(6_000, 0, 1);
        let by_order = by_murmur2(sales.iter().map(|s| s.order_id.as_str()), PARTITIONS);
        let by_show = by_murmur2(sales.iter().map(|s| s.show), PARTITIONS);
        let charts = [
            chart("keyed by order id", &by_order, &BTreeMap::new()),
            chart("keyed by show", &by_show, &shows_by_partition()),
        ];
        insta::assert_snapshot!("partition_skew_charts", charts.join("\n"));
    }

    #[test]
    fn keyed_by_show_one_partition_takes_the_stadium_and_keyed_by_order_none_stands_out() {
        let sales = on_sale_minute(6_000, 0, 2);
        let stadium = sales.iter().filter(|s| s.show == STADIUM).count() as u64;
        assert!((3_400..3_800).contains(&stadium), "{stadium}");
        let by_show = by_murmur2(sales.iter().map(|s| s.show), PARTITIONS);
        let hot = partition_for_key(STADIUM.as_bytes(), PARTITIONS);
        assert!(by_show[usize::try_from(hot).unwrap()] >= stadium);
        let by_order = by_murmur2(sales.iter().map(|s| s.order_id.as_str()), PARTITIONS);
        let (least, most) = (
            by_order.iter().min().unwrap(),
            by_order.iter().max().unwrap(),
        );
        assert!(most - least < 150, "{by_order:?}");
    }
}
