//! The catalog's scenarios declared with eddy's DSL, each the twin of its Kafka Streams
//! declaration in `tests/reference/streams/src/main/java/dev/eddy/reference/Catalog.java`.

use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::store::StoreBuilder;
use eddy::streams::windows::{JoinWindows, SessionWindows, SlidingWindows, TimeWindows};
use eddy::streams::{
    Consumed, Grouped, Joined, Materialized, Named, Processor, ProcessorContext, Produced,
    Punctuation, PunctuationType, Record, StreamJoined, StreamsBuilder, StreamsError,
};
use std::time::Duration;

use super::{Codec, Scenario};

fn strings() -> Consumed<String, String> {
    Consumed::with(StringSerde, StringSerde)
}

/// The scenario `name`, built with eddy's DSL.
pub fn scenario(name: &str) -> Scenario {
    use Codec::{Long, SessionWindowed, String as Str, TimeWindowed};
    let builder = StreamsBuilder::new();
    let (inputs, outputs) = match name {
        "word-count" => {
            builder
                .stream(
                    "text-lines",
                    Consumed::with(Nullable(StringSerde), StringSerde),
                )
                .flat_map_values(|line: String| java_split_words(&line.to_lowercase()))
                .group_by(
                    |_, word| word.clone(),
                    Grouped::with(StringSerde, StringSerde),
                )
                .count(Materialized::named("counts"))
                .to_stream()
                .to("word-counts", Produced::default());
            (
                vec![("text-lines", Str, Str)],
                vec![("word-counts", Str, Long)],
            )
        }
        "stateless-chain" => {
            builder
                .stream("orders", Consumed::with(Nullable(StringSerde), StringSerde))
                .filter_not(|_, v| v.starts_with("test"))
                .map_values(|v| v.to_uppercase())
                .select_key(|_, v| v[..1].to_string())
                .peek(|_, _| {})
                .to("orders-by-letter", Produced::with(StringSerde, StringSerde));
            (
                vec![("orders", Str, Str)],
                vec![("orders-by-letter", Str, Str)],
            )
        }
        "split-merge" => {
            let mut branches = builder
                .stream("orders", strings())
                .named(Named::new("route-"))
                .split()
                .branch(|_, v| v.starts_with('a'), Some("a"))
                .branch(|_, v| v.starts_with('b'), None)
                .default_branch(None);
            let a = branches.remove("route-a").expect("branch a");
            let b = branches.remove("route-2").expect("branch 2");
            a.merge(b).to("a-or-b", Produced::default());
            branches
                .remove("route-0")
                .expect("default branch")
                .map_values(|v| format!("other:{v}"))
                .to("others", Produced::with(StringSerde, StringSerde));
            (
                vec![("orders", Str, Str)],
                vec![("a-or-b", Str, Str), ("others", Str, Str)],
            )
        }
        "table-filter" => {
            builder
                .table(
                    "prices",
                    Consumed::with(StringSerde, I64Serde),
                    Materialized::named("prices"),
                )
                .filter(|_, v| *v >= 100)
                .to_stream()
                .to("expensive", Produced::default());
            (vec![("prices", Str, Long)], vec![("expensive", Str, Long)])
        }
        "reduce-latest" => {
            builder
                .stream("orders", strings())
                .group_by_key(Grouped::default())
                .reduce(|agg, v| format!("{agg},{v}"), Materialized::default())
                .to_stream()
                .to("order-history", Produced::default());
            (
                vec![("orders", Str, Str)],
                vec![("order-history", Str, Str)],
            )
        }
        "aggregate-lengths" => {
            builder
                .stream("orders", strings())
                .group_by_key(Grouped::default())
                .aggregate(
                    || 0i64,
                    |_, v: String, total| total + v.len() as i64,
                    Materialized::with(StringSerde, I64Serde),
                )
                .to_stream()
                .to("lengths", Produced::default());
            (vec![("orders", Str, Str)], vec![("lengths", Str, Long)])
        }
        "repartition-count" => {
            builder
                .stream("orders", strings())
                .map(|k, v| (v, k))
                .repartition(Grouped::with(StringSerde, StringSerde))
                .group_by_key(Grouped::default())
                .count(Materialized::default())
                .to_stream()
                .to("orders-per-item", Produced::default());
            (
                vec![("orders", Str, Str)],
                vec![("orders-per-item", Str, Long)],
            )
        }
        "named-chain" => {
            builder
                .stream("orders", strings().named("read-orders"))
                .named(Named::new("drop-empty"))
                .filter(|_, v| !v.is_empty())
                .group_by(
                    |_, v| v.clone(),
                    Grouped::with(StringSerde, StringSerde).named("by-item"),
                )
                .named(Named::new("count-items"))
                .count(Materialized::named("item-counts"))
                .named(Named::new("item-count-updates"))
                .to_stream()
                .to("item-counts", Produced::default().named("write-counts"));
            (vec![("orders", Str, Str)], vec![("item-counts", Str, Long)])
        }
        "first-seen" => {
            builder.add_state_store(StoreBuilder::key_value("seen", StringSerde, StringSerde));
            builder
                .stream("orders", strings())
                .process(|| FirstSeen { seen: None }, &["seen"])
                .to("first-orders", Produced::with(StringSerde, StringSerde));
            (vec![("orders", Str, Str)], vec![("first-orders", Str, Str)])
        }
        "windowed-count" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by(
                    TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(5))
                        .expect("windows"),
                )
                .count(Materialized::named("clicks-per-window"))
                .to_stream()
                .to("clicks-per-window", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("clicks-per-window", TimeWindowed(10_000), Long)],
            )
        }
        "hopping-count" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by(
                    TimeWindows::of_size_with_no_grace(Duration::from_secs(10))
                        .and_then(|w| w.advance_by(Duration::from_secs(5)))
                        .expect("windows"),
                )
                .count(Materialized::default())
                .to_stream()
                .to("hopping-counts", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("hopping-counts", TimeWindowed(10_000), Long)],
            )
        }
        "sliding-total" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_sliding(
                    SlidingWindows::of_time_difference_and_grace(
                        Duration::from_secs(5),
                        Duration::from_secs(2),
                    )
                    .expect("windows"),
                )
                .aggregate(
                    || 0i64,
                    |_, v: String, total| total + v.len() as i64,
                    Materialized::named("sliding-totals").with_value_serde(I64Serde),
                )
                .to_stream()
                .to("sliding-totals", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("sliding-totals", TimeWindowed(5_000), Long)],
            )
        }
        "session-count" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_session(
                    SessionWindows::of_inactivity_gap_and_grace(
                        Duration::from_secs(5),
                        Duration::from_secs(1),
                    )
                    .expect("windows"),
                )
                .count(Materialized::named("sessions"))
                .to_stream()
                .to("session-counts", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("session-counts", SessionWindowed, Long)],
            )
        }
        "windowed-reduce" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by(
                    TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(2))
                        .expect("windows"),
                )
                .reduce(|a, b| format!("{a}+{b}"), Materialized::default())
                .to_stream()
                .to("page-trails", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("page-trails", TimeWindowed(10_000), Str)],
            )
        }
        "stream-join-inner" | "stream-join-left" | "stream-join-outer" => {
            let orders = builder.stream("orders", strings());
            let payments = builder.stream("payments", strings());
            let windows = JoinWindows::of_time_difference_and_grace(
                Duration::from_secs(5),
                Duration::from_secs(2),
            )
            .expect("windows");
            let joined = || StreamJoined::with(StringSerde, StringSerde, StringSerde);
            let text = |v: Option<&String>| v.map_or("null".to_string(), String::clone);
            let out = match name {
                "stream-join-inner" => {
                    orders.join(payments, |o, p| format!("{o}/{p}"), windows, joined())
                }
                "stream-join-left" => orders.left_join(
                    payments,
                    move |o, p| format!("{o}/{}", text(p)),
                    windows,
                    joined(),
                ),
                _ => orders.outer_join(
                    payments,
                    move |o, p| format!("{}/{}", text(o), text(p)),
                    windows,
                    joined(),
                ),
            };
            out.to("paid-orders", Produced::with(StringSerde, StringSerde));
            (
                vec![("orders", Str, Str), ("payments", Str, Str)],
                vec![("paid-orders", Str, Str)],
            )
        }
        "stream-table-join-inner" | "stream-table-join-left" => {
            let orders = builder.stream("orders", strings());
            let customers = builder.table("customers", strings(), Materialized::default());
            let out = if name.ends_with("inner") {
                orders.join_table(&customers, |o, c| format!("{o}@{c}"), Joined::default())
            } else {
                orders.left_join_table(
                    &customers,
                    |o, c| format!("{o}@{}", c.map_or("null", String::as_str)),
                    Joined::default(),
                )
            };
            out.to("enriched-orders", Produced::with(StringSerde, StringSerde));
            (
                vec![("orders", Str, Str), ("customers", Str, Str)],
                vec![("enriched-orders", Str, Str)],
            )
        }
        "table-join-inner" | "table-join-left" | "table-join-outer" => {
            let customers = builder.table("customers", strings(), Materialized::named("customers"));
            let addresses = builder.table("addresses", strings(), Materialized::default());
            let text = |v: Option<&String>| v.map_or("null".to_string(), String::clone);
            let out = match name {
                "table-join-inner" => customers.join(
                    &addresses,
                    |c, a| format!("{c}@{a}"),
                    Materialized::default(),
                ),
                "table-join-left" => customers.left_join(
                    &addresses,
                    move |c, a| format!("{c}@{}", text(a)),
                    Materialized::default(),
                ),
                _ => customers.outer_join(
                    &addresses,
                    move |c, a| format!("{}@{}", text(c), text(a)),
                    Materialized::default(),
                ),
            };
            out.to_stream().to(
                "customer-addresses",
                Produced::with(StringSerde, Nullable(StringSerde)),
            );
            (
                vec![("customers", Str, Str), ("addresses", Str, Str)],
                vec![("customer-addresses", Str, Str)],
            )
        }
        "table-group-count" => {
            builder
                .table("user-cities", strings(), Materialized::default())
                .group_by(
                    |user, city| (city.clone(), user.clone()),
                    Grouped::with(StringSerde, StringSerde),
                )
                .count(Materialized::default())
                .to_stream()
                .to(
                    "users-per-city",
                    Produced::with(StringSerde, Nullable(I64Serde)),
                );
            (
                vec![("user-cities", Str, Str)],
                vec![("users-per-city", Str, Long)],
            )
        }
        "table-group-reduce" => {
            builder
                .table(
                    "balances",
                    Consumed::with(StringSerde, I64Serde),
                    Materialized::named("balances"),
                )
                .group_by(
                    |account, balance| (account[..2].to_string(), *balance),
                    Grouped::with(StringSerde, I64Serde).named("by-region"),
                )
                .reduce(
                    |total, b| total + b,
                    |total, b| total - b,
                    Materialized::named("region-totals"),
                )
                .to_stream()
                .to("region-totals", Produced::default());
            (
                vec![("balances", Str, Long)],
                vec![("region-totals", Str, Long)],
            )
        }
        "suppress-window-close" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by(
                    TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(2))
                        .expect("windows"),
                )
                .count(Materialized::default())
                .suppress_until_window_closes()
                .to_stream()
                .to("final-counts", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("final-counts", TimeWindowed(10_000), Long)],
            )
        }
        "suppress-time-limit" => {
            builder
                .table(
                    "prices",
                    Consumed::with(StringSerde, I64Serde),
                    Materialized::default(),
                )
                .suppress_until_time_limit(5_000)
                .to_stream()
                .to("settled-prices", Produced::default());
            (
                vec![("prices", Str, Long)],
                vec![("settled-prices", Str, Long)],
            )
        }
        "global-join-inner" | "global-join-left" => {
            let orders = builder.stream("orders", strings());
            let products = builder.global_table("products", strings(), Materialized::default());
            let out = if name.ends_with("inner") {
                orders.join_global(
                    &products,
                    |_, product| product.clone(),
                    |o, p| format!("{o}:{p}"),
                )
            } else {
                orders.left_join_global(
                    &products,
                    |_, product| product.clone(),
                    |o, p| format!("{o}:{}", p.map_or("null", String::as_str)),
                )
            };
            out.to("priced-orders", Produced::with(StringSerde, StringSerde));
            (
                vec![("orders", Str, Str), ("products", Str, Str)],
                vec![("priced-orders", Str, Str)],
            )
        }
        "named-mixed" => {
            let kept = builder
                .stream("orders", strings().named("src"))
                .named(Named::new("keep"))
                .filter(|_, v| !v.is_empty())
                .map_values(|v| v.to_uppercase());
            kept.clone().to(
                "upper-orders",
                Produced::with(StringSerde, StringSerde).named("write-upper"),
            );
            kept.clone()
                .group_by(
                    |_, v| v.clone(),
                    Grouped::with(StringSerde, StringSerde).named("by-item"),
                )
                .count(Materialized::default())
                .named(Named::new("counts-out"))
                .to_stream()
                .to(
                    "item-counts",
                    Produced::with(StringSerde, Nullable(I64Serde)),
                );
            let prices = builder.table(
                "prices",
                strings().named("prices-in"),
                Materialized::default(),
            );
            let payments = builder.stream("payments", strings());
            kept.clone()
                .join(
                    payments,
                    |o, p| format!("{o}/{p}"),
                    JoinWindows::of_time_difference_with_no_grace(Duration::from_secs(5))
                        .expect("windows"),
                    StreamJoined::with(StringSerde, StringSerde, StringSerde).named("pay"),
                )
                .to("paid", Produced::with(StringSerde, StringSerde));
            kept.left_join_table(
                &prices,
                |o, p| format!("{o}@{}", p.map_or("null", String::as_str)),
                Joined::with(StringSerde, StringSerde).named("priced"),
            )
            .to("priced", Produced::with(StringSerde, StringSerde));
            (
                vec![
                    ("orders", Str, Str),
                    ("payments", Str, Str),
                    ("prices", Str, Str),
                ],
                vec![
                    ("upper-orders", Str, Str),
                    ("item-counts", Str, Long),
                    ("paid", Str, Str),
                    ("priced", Str, Str),
                ],
            )
        }
        "emit-on-window-close" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by(
                    TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(1))
                        .and_then(|w| w.advance_by(Duration::from_secs(5)))
                        .expect("windows"),
                )
                .emit_on_window_close()
                .count(Materialized::default())
                .to_stream()
                .to("final-counts", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("final-counts", TimeWindowed(10_000), Long)],
            )
        }
        "table-map-values" => {
            builder
                .table(
                    "prices",
                    Consumed::with(StringSerde, I64Serde),
                    Materialized::default(),
                )
                .map_values(|_, v| v * 2)
                .filter_not(|_, v| *v > 500)
                .to_stream()
                .to(
                    "doubled-prices",
                    Produced::with(StringSerde, Nullable(I64Serde)),
                );
            (
                vec![("prices", Str, Long)],
                vec![("doubled-prices", Str, Long)],
            )
        }
        "stream-to-table" => {
            builder
                .stream("orders", strings())
                .select_key(|_, v| v.clone())
                .to_table(Materialized::named("last-order-by-item").with_key_serde(StringSerde))
                .to_stream()
                .to("last-order-by-item", Produced::default());
            (
                vec![("orders", Str, Str)],
                vec![("last-order-by-item", Str, Str)],
            )
        }
        "session-aggregate" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_session(
                    SessionWindows::of_inactivity_gap_with_no_grace(Duration::from_secs(3))
                        .expect("windows"),
                )
                .aggregate(
                    String::new,
                    |_, v: String, agg| agg + &v,
                    |_, a, b| format!("{a}|{b}"),
                    Materialized::with(StringSerde, StringSerde),
                )
                .to_stream()
                .to("session-pages", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("session-pages", SessionWindowed, Str)],
            )
        }
        "sliding-emit-final" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_sliding(
                    SlidingWindows::of_time_difference_and_grace(
                        Duration::from_secs(5),
                        Duration::from_secs(1),
                    )
                    .expect("windows"),
                )
                .emit_on_window_close()
                .count(Materialized::default())
                .to_stream()
                .to("sliding-final-counts", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("sliding-final-counts", TimeWindowed(5_000), Long)],
            )
        }
        "session-emit-final" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_session(
                    SessionWindows::of_inactivity_gap_and_grace(
                        Duration::from_secs(4),
                        Duration::from_secs(1),
                    )
                    .expect("windows"),
                )
                .emit_on_window_close()
                .reduce(
                    |a, b| format!("{a}+{b}"),
                    Materialized::named("final-sessions"),
                )
                .to_stream()
                .to("session-final-pages", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("session-final-pages", SessionWindowed, Str)],
            )
        }
        "sliding-reduce" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_sliding(
                    SlidingWindows::of_time_difference_and_grace(
                        Duration::from_secs(3),
                        Duration::from_secs(10),
                    )
                    .expect("windows"),
                )
                .reduce(|a, b| format!("{a}+{b}"), Materialized::default())
                .to_stream()
                .to("sliding-trails", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("sliding-trails", TimeWindowed(3_000), Str)],
            )
        }
        "session-reduce" => {
            builder
                .stream("clicks", strings())
                .group_by_key(Grouped::default())
                .windowed_by_session(
                    SessionWindows::of_inactivity_gap_and_grace(
                        Duration::from_secs(3),
                        Duration::from_secs(2),
                    )
                    .expect("windows"),
                )
                .reduce(|a, b| format!("{a}+{b}"), Materialized::default())
                .to_stream()
                .to("session-trails", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![("session-trails", SessionWindowed, Str)],
            )
        }
        "null-keys" => {
            let keyless = || Consumed::with(Nullable(StringSerde), StringSerde);
            let clicks = builder.stream("clicks", keyless());
            let views = builder.stream("views", keyless());
            let users = builder.table("users", keyless(), Materialized::default());
            clicks
                .clone()
                .group_by_key(Grouped::with(Nullable(StringSerde), StringSerde))
                .count(Materialized::default())
                .to_stream()
                .to("click-counts", Produced::default());
            let text = |v: Option<&String>| v.map_or("null".to_string(), String::clone);
            clicks
                .clone()
                .left_join(
                    views,
                    move |c, v| format!("{c}/{}", text(v)),
                    JoinWindows::of_time_difference_with_no_grace(Duration::from_secs(5))
                        .expect("windows"),
                    StreamJoined::with(Nullable(StringSerde), StringSerde, StringSerde),
                )
                .to(
                    "clicks-with-views",
                    Produced::with(Nullable(StringSerde), StringSerde),
                );
            clicks
                .left_join_table(
                    &users,
                    move |c, u| format!("{c}@{}", text(u)),
                    Joined::default(),
                )
                .to(
                    "clicks-with-users",
                    Produced::with(Nullable(StringSerde), StringSerde),
                );
            (
                vec![
                    ("clicks", Str, Str),
                    ("views", Str, Str),
                    ("users", Str, Str),
                ],
                vec![
                    ("click-counts", Str, Long),
                    ("clicks-with-views", Str, Str),
                    ("clicks-with-users", Str, Str),
                ],
            )
        }
        "null-keys-windowed" => {
            let clicks =
                builder.stream("clicks", Consumed::with(Nullable(StringSerde), StringSerde));
            let grouped = || {
                clicks
                    .clone()
                    .group_by_key(Grouped::with(Nullable(StringSerde), StringSerde))
            };
            grouped()
                .windowed_by(
                    TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(2))
                        .expect("windows"),
                )
                .count(Materialized::default())
                .to_stream()
                .to("window-counts", Produced::default());
            grouped()
                .windowed_by_session(
                    SessionWindows::of_inactivity_gap_and_grace(
                        Duration::from_secs(3),
                        Duration::from_secs(1),
                    )
                    .expect("windows"),
                )
                .count(Materialized::default())
                .to_stream()
                .to("session-counts", Produced::default());
            grouped()
                .windowed_by_sliding(
                    SlidingWindows::of_time_difference_and_grace(
                        Duration::from_secs(5),
                        Duration::from_secs(1),
                    )
                    .expect("windows"),
                )
                .count(Materialized::default())
                .to_stream()
                .to("sliding-counts", Produced::default());
            (
                vec![("clicks", Str, Str)],
                vec![
                    ("window-counts", TimeWindowed(10_000), Long),
                    ("session-counts", SessionWindowed, Long),
                    ("sliding-counts", TimeWindowed(5_000), Long),
                ],
            )
        }
        "event-time-in-value" => {
            // The value is `<millis>|<reading>`; a value without a number fails the task.
            let from_value = |record: &eddy::log::Record, _partition_time: i64| {
                record
                    .value
                    .as_deref()
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.split('|').next())
                    .and_then(|millis| millis.parse().ok())
                    .unwrap_or(-1)
            };
            builder
                .stream("readings", strings().with_timestamp_extractor(from_value))
                .group_by_key(Grouped::default())
                .windowed_by(
                    TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(2))
                        .expect("windows"),
                )
                .count(Materialized::default())
                .to_stream()
                .to("readings-per-window", Produced::default());
            (
                vec![("readings", Str, Str)],
                vec![("readings-per-window", TimeWindowed(10_000), Long)],
            )
        }
        other => panic!("the catalog scenario {other} has no eddy topology here"),
    };
    Scenario {
        topology: builder.build().expect("the topology builds"),
        inputs,
        outputs,
    }
}

/// Java's `line.split("\\W+")`: runs of non-word characters separate words; a leading
/// separator gives an empty first word, and every empty word at the end is dropped, so a
/// line of separators alone gives none. A line with no separator is its own word, even empty.
fn java_split_words(line: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let (mut in_separator, mut separated) = (false, false);
    for c in line.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            if in_separator {
                words.push(std::mem::take(&mut word));
                in_separator = false;
            }
            word.push(c);
        } else {
            in_separator = true;
            separated = true;
        }
    }
    words.push(word);
    if separated {
        while words.last().is_some_and(String::is_empty) {
            words.pop();
        }
    }
    words
}

/// The catalog's Processor API scenario: forwards the first value of each key and, every
/// 1,000 ms of stream time, how many keys it has seen.
struct FirstSeen {
    seen: Option<eddy::streams::KeyValueStoreHandle<String, String>>,
}

impl Processor<String, String, String, String> for FirstSeen {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, String>) -> Result<(), StreamsError> {
        self.seen = Some(ctx.key_value_store_handle("seen")?);
        ctx.schedule(1000, PunctuationType::StreamTime);
        Ok(())
    }

    fn process(
        &mut self,
        record: Record<String, String>,
        ctx: &mut ProcessorContext<'_, String, String>,
    ) -> Result<(), StreamsError> {
        let handle = self.seen.as_ref().expect("initialized");
        let first = {
            let mut seen = ctx.key_value_store(handle);
            let first = seen.get(&record.key)?.is_none();
            if first {
                seen.put(&record.key, Some(&record.value))?;
            }
            first
        };
        if first {
            ctx.forward(record);
        }
        Ok(())
    }

    fn punctuate(
        &mut self,
        punctuation: Punctuation,
        ctx: &mut ProcessorContext<'_, String, String>,
    ) -> Result<(), StreamsError> {
        let handle = self.seen.as_ref().expect("initialized");
        let n = ctx.key_value_store(handle).len();
        ctx.forward(Record::new(
            "keys-seen".to_string(),
            n.to_string(),
            punctuation.timestamp,
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::java_split_words;

    /// What Java 17 gives for `s.split("\\W+")`.
    #[test]
    fn words_split_as_java_splits_them() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[""]),
            ("...", &[]),
            (" ", &[]),
            ("abc", &["abc"]),
            (".a", &["", "a"]),
            ("a.", &["a"]),
            ("a..b  c", &["a", "b", "c"]),
            ("..a..", &["", "a"]),
            ("snake_case x1", &["snake_case", "x1"]),
            ("caf\u{e9} ok", &["caf", "ok"]),
        ];
        for (line, words) in cases {
            assert_eq!(java_split_words(line), *words, "{line:?}");
        }
    }
}
