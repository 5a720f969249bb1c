package dev.eddy.reference;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The named topologies that eddy's streams engine is compared against. Each has a folder
 * {@code catalog/<name>/} with {@code input.jsonl} and the {@code expected.jsonl} that
 * Kafka Streams must produce from it.
 */
public final class Catalog {
    private Catalog() {}

    /** Window size of {@code windowed-count}. */
    static final long CLICK_WINDOW_MS = 10_000;
    /** Grace period of {@code windowed-count}. */
    static final long CLICK_GRACE_MS = 5_000;

    /** Every scenario, by name. */
    public static Map<String, Scenario> all() {
        Map<String, Scenario> all = new TreeMap<>();
        for (Scenario s : List.of(wordCount(), windowedCount(), statelessChain(), splitMerge(),
                tableFilter(), reduceLatest(), aggregateLengths(), repartitionCount(), namedChain(),
                firstSeen(), hoppingCount(), slidingTotal(), sessionCount(), windowedReduce(),
                streamJoin("inner"), streamJoin("left"), streamJoin("outer"),
                streamTableJoin("inner"), streamTableJoin("left"),
                tableJoin("inner"), tableJoin("left"), tableJoin("outer"),
                tableGroupCount(), tableGroupReduce(), suppressWindowClose(), suppressTimeLimit(),
                globalJoin("inner"), globalJoin("left"), namedMixed(), emitOnWindowClose(),
                tableMapValues(), streamToTable(), sessionAggregate(), slidingEmitFinal(),
                sessionEmitFinal(), slidingReduce(), sessionReduce(), eventTimeInValue(), nullKeys(),
                nullKeysWindowed())) {
            all.put(s.name(), s);
        }
        return all;
    }

    /** The scenario with this name. */
    public static Scenario get(String name) {
        Scenario s = all().get(name);
        if (s == null) {
            throw new IllegalArgumentException("no scenario " + name + "; known: " + all().keySet());
        }
        return s;
    }

    /**
     * Kafka's WordCountDemo: lines are split on non-word characters, lower-cased, re-keyed by
     * word (a repartition) and counted in a key-value store.
     */
    static Scenario wordCount() {
        return new Scenario(
                "word-count",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("text-lines", Consumed.with(Serdes.String(), Serdes.String()))
                            .flatMapValues(line -> Arrays.asList(
                                    line.toLowerCase(Locale.ROOT).split("\\W+")))
                            .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                            .count(Materialized.as("counts"))
                            .toStream()
                            .to("word-counts", Produced.with(Serdes.String(), Serdes.Long()));
                    return builder.build();
                },
                List.of(new Scenario.Topic<>("text-lines", JsonCodec.STRING, JsonCodec.STRING)),
                List.of(new Scenario.Topic<>("word-counts", JsonCodec.STRING, JsonCodec.LONG)),
                i -> new Scenario.Event("text-lines", null,
                        "word" + (i % 1000) + " word" + (i * 7 % 1000) + " word" + (i * 13 % 1000),
                        i));
    }

    /**
     * Clicks per user in tumbling 10-second windows with 5 seconds of grace: records later
     * than the grace period are dropped.
     */
    static Scenario windowedCount() {
        return new Scenario(
                "windowed-count",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", Consumed.with(Serdes.String(), Serdes.String()))
                            .groupByKey()
                            .windowedBy(TimeWindows.ofSizeAndGrace(
                                    Duration.ofMillis(CLICK_WINDOW_MS), Duration.ofMillis(CLICK_GRACE_MS)))
                            .count(Materialized.as("clicks-per-window"))
                            .toStream()
                            .to("clicks-per-window", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, CLICK_WINDOW_MS),
                                    Serdes.Long()));
                    return builder.build();
                },
                List.of(new Scenario.Topic<>("clicks", JsonCodec.STRING, JsonCodec.STRING)),
                List.of(new Scenario.Topic<>("clicks-per-window",
                        JsonCodec.timeWindowedString(CLICK_WINDOW_MS), JsonCodec.LONG)),
                i -> new Scenario.Event("clicks", "user-" + (i % 1000), "/page/" + (i % 17), i));
    }

    // Fresh option objects each time: Kafka's withName() changes the object it is called on.
    private static Consumed<String, String> stringsIn() {
        return Consumed.with(Serdes.String(), Serdes.String());
    }

    private static Produced<String, String> stringsOut() {
        return Produced.with(Serdes.String(), Serdes.String());
    }

    private static Produced<String, Long> longsOut() {
        return Produced.with(Serdes.String(), Serdes.Long());
    }

    private static Scenario.Topic<String, String> strings(String topic) {
        return new Scenario.Topic<>(topic, JsonCodec.STRING, JsonCodec.STRING);
    }

    private static Scenario.Topic<String, Long> longs(String topic) {
        return new Scenario.Topic<>(topic, JsonCodec.STRING, JsonCodec.LONG);
    }

    private static Scenario.Event order(long i) {
        return new Scenario.Event("orders", "order-" + (i % 1000), "item-" + (i % 37), i);
    }

    /**
     * Three stateless operations: drop test orders, upper-case the value, key by the value's
     * first letter (no stateful operation follows, so no repartition).
     */
    static Scenario statelessChain() {
        return new Scenario(
                "stateless-chain",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("orders", stringsIn())
                            .filterNot((k, v) -> v.startsWith("test"))
                            .mapValues(v -> v.toUpperCase(Locale.ROOT))
                            .selectKey((k, v) -> v.substring(0, 1))
                            .peek((k, v) -> { })
                            .to("orders-by-letter", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(strings("orders-by-letter")),
                Catalog::order);
    }

    /** Split into named branches and a default one; two branches are merged again. */
    static Scenario splitMerge() {
        return new Scenario(
                "split-merge",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    Map<String, KStream<String, String>> branches = builder.stream("orders", stringsIn())
                            .split(Named.as("route-"))
                            .branch((k, v) -> v.startsWith("a"), Branched.as("a"))
                            .branch((k, v) -> v.startsWith("b"))
                            .defaultBranch();
                    branches.get("route-a").merge(branches.get("route-2")).to("a-or-b", stringsOut());
                    branches.get("route-0").mapValues(v -> "other:" + v).to("others", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(strings("a-or-b"), strings("others")),
                Catalog::order);
    }

    /**
     * A table from a topic, filtered: an update that fails the filter deletes the key
     * downstream (a tombstone), and a null value deletes it at the source.
     */
    static Scenario tableFilter() {
        return new Scenario(
                "table-filter",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.table("prices", Consumed.with(Serdes.String(), Serdes.Long()),
                                    Materialized.as("prices"))
                            .filter((k, v) -> v >= 100)
                            .toStream()
                            .to("expensive", longsOut());
                    return builder.build();
                },
                List.of(longs("prices")),
                List.of(longs("expensive")),
                i -> new Scenario.Event("prices", "item-" + (i % 1000), null, i));
    }

    /** The latest value per key by reduce, in a generated store; keys unchanged. */
    static Scenario reduceLatest() {
        return new Scenario(
                "reduce-latest",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("orders", stringsIn())
                            .groupByKey()
                            .reduce((agg, v) -> agg + "," + v)
                            .toStream()
                            .to("order-history", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(strings("order-history")),
                Catalog::order);
    }

    /** The total length of each key's values, by aggregate with serdes and a generated store. */
    static Scenario aggregateLengths() {
        return new Scenario(
                "aggregate-lengths",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("orders", stringsIn())
                            .groupByKey()
                            .aggregate(() -> 0L, (k, v, total) -> total + v.length(),
                                    Materialized.with(Serdes.String(), Serdes.Long()))
                            .toStream()
                            .to("lengths", longsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(longs("lengths")),
                Catalog::order);
    }

    /** Re-keyed by value, repartitioned explicitly by a generated name, then counted. */
    static Scenario repartitionCount() {
        return new Scenario(
                "repartition-count",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("orders", stringsIn())
                            .map((k, v) -> KeyValue.pair(v, k))
                            .repartition(Repartitioned.with(Serdes.String(), Serdes.String()))
                            .groupByKey()
                            .count()
                            .toStream()
                            .to("orders-per-item", longsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(longs("orders-per-item")),
                Catalog::order);
    }

    /** Every node named: names replace generated ones and keep later indexes unchanged. */
    static Scenario namedChain() {
        return new Scenario(
                "named-chain",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("orders", stringsIn().withName("read-orders"))
                            .filter((k, v) -> !v.isEmpty(), Named.as("drop-empty"))
                            .groupBy((k, v) -> v, Grouped.<String, String>as("by-item")
                                    .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                            .count(Named.as("count-items"), Materialized.as("item-counts"))
                            .toStream(Named.as("item-count-updates"))
                            .to("item-counts", longsOut().withName("write-counts"));
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(longs("item-counts")),
                Catalog::order);
    }

    /**
     * The Processor API: a processor with a store forwards the first value of each key and,
     * every second of stream time, how many keys it has seen.
     */
    static Scenario firstSeen() {
        return new Scenario(
                "first-seen",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.addStateStore(Stores.keyValueStoreBuilder(
                            Stores.inMemoryKeyValueStore("seen"), Serdes.String(), Serdes.String()));
                    builder.stream("orders", stringsIn())
                            .process(FirstSeen::new, "seen")
                            .to("first-orders", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(strings("first-orders")),
                Catalog::order);
    }

    private static Scenario.Event click(long i) {
        return new Scenario.Event("clicks", "user-" + (i % 1000), "/page/" + (i % 17), i);
    }

    /** Hopping windows of 10 s every 5 s, no grace, store name generated. */
    static Scenario hoppingCount() {
        return new Scenario(
                "hopping-count",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10))
                                    .advanceBy(Duration.ofSeconds(5)))
                            .count()
                            .toStream()
                            .to("hopping-counts", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("hopping-counts",
                        JsonCodec.timeWindowedString(10_000), JsonCodec.LONG)),
                Catalog::click);
    }

    /** Sliding windows of 5 s with 2 s grace: the total length of values within 5 s. */
    static Scenario slidingTotal() {
        return new Scenario(
                "sliding-total",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                                    Duration.ofSeconds(5), Duration.ofSeconds(2)))
                            .aggregate(() -> 0L, (k, v, total) -> total + v.length(),
                                    Materialized.<String, Long, org.apache.kafka.streams.state.WindowStore<
                                            org.apache.kafka.common.utils.Bytes, byte[]>>as("sliding-totals")
                                            .withValueSerde(Serdes.Long()))
                            .toStream()
                            .to("sliding-totals", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 5_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("sliding-totals",
                        JsonCodec.timeWindowedString(5_000), JsonCodec.LONG)),
                Catalog::click);
    }

    /** Sessions with a 5 s gap and 1 s grace: merges delete the merged sessions downstream. */
    static Scenario sessionCount() {
        return new Scenario(
                "session-count",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                                    Duration.ofSeconds(5), Duration.ofSeconds(1)))
                            .count(Materialized.as("sessions"))
                            .toStream()
                            .to("session-counts", Produced.with(
                                    WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("session-counts",
                        JsonCodec.sessionWindowedString(), JsonCodec.LONG)),
                Catalog::click);
    }

    /** Tumbling windows of 10 s with 2 s grace: values of each window joined by reduce. */
    static Scenario windowedReduce() {
        return new Scenario(
                "windowed-reduce",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(2)))
                            .reduce((a, b) -> a + "+" + b)
                            .toStream()
                            .to("page-trails", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), Serdes.String()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("page-trails",
                        JsonCodec.timeWindowedString(10_000), JsonCodec.STRING)),
                Catalog::click);
    }

    /**
     * Orders joined with payments of the same key at most 5 s apart, with 2 s of grace: an
     * inner, left or outer join ({@code stream-join-KIND}).
     */
    static Scenario streamJoin(String kind) {
        return new Scenario(
                "stream-join-" + kind,
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KStream<String, String> orders = builder.stream("orders", stringsIn());
                    KStream<String, String> payments = builder.stream("payments", stringsIn());
                    JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(
                            Duration.ofSeconds(5), Duration.ofSeconds(2));
                    StreamJoined<String, String, String> joined =
                            StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
                    KStream<String, String> out = switch (kind) {
                        case "inner" -> orders.join(payments, (o, p) -> o + "/" + p, windows, joined);
                        case "left" -> orders.leftJoin(payments, (o, p) -> o + "/" + p, windows, joined);
                        default -> orders.outerJoin(payments, (o, p) -> o + "/" + p, windows, joined);
                    };
                    out.to("paid-orders", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders"), strings("payments")),
                List.of(strings("paid-orders")),
                Catalog::order);
    }

    /**
     * Orders enriched with the customer's name from a table (not materialized by the user: the
     * join materializes it): an inner or left join ({@code stream-table-join-KIND}).
     */
    static Scenario streamTableJoin(String kind) {
        return new Scenario(
                "stream-table-join-" + kind,
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KStream<String, String> orders = builder.stream("orders", stringsIn());
                    KTable<String, String> customers = builder.table("customers", stringsIn());
                    KStream<String, String> out = kind.equals("inner")
                            ? orders.join(customers, (o, c) -> o + "@" + c)
                            : orders.leftJoin(customers, (o, c) -> o + "@" + c);
                    out.to("enriched-orders", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders"), strings("customers")),
                List.of(strings("enriched-orders")),
                Catalog::order);
    }

    /**
     * Customers joined with their addresses, two tables: an inner, left or outer join whose
     * result is a table ({@code table-join-KIND}); updates and deletions of either side.
     */
    static Scenario tableJoin(String kind) {
        return new Scenario(
                "table-join-" + kind,
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KTable<String, String> customers = builder.table("customers", stringsIn(),
                            Materialized.as("customers"));
                    KTable<String, String> addresses = builder.table("addresses", stringsIn());
                    KTable<String, String> out = switch (kind) {
                        case "inner" -> customers.join(addresses, (c, a) -> c + "@" + a);
                        case "left" -> customers.leftJoin(addresses, (c, a) -> c + "@" + a);
                        default -> customers.outerJoin(addresses, (c, a) -> c + "@" + a);
                    };
                    out.toStream().to("customer-addresses", stringsOut());
                    return builder.build();
                },
                List.of(strings("customers"), strings("addresses")),
                List.of(strings("customer-addresses")),
                Catalog::order);
    }

    /** Users per city from a table of users' cities: moving a user updates two cities. */
    static Scenario tableGroupCount() {
        return new Scenario(
                "table-group-count",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.table("user-cities", stringsIn())
                            .groupBy((user, city) -> KeyValue.pair(city, user),
                                    Grouped.with(Serdes.String(), Serdes.String()))
                            .count()
                            .toStream()
                            .to("users-per-city", longsOut());
                    return builder.build();
                },
                List.of(strings("user-cities")),
                List.of(longs("users-per-city")),
                Catalog::order);
    }

    /** A region's total of account balances: reduce with an adder and a subtractor. */
    static Scenario tableGroupReduce() {
        return new Scenario(
                "table-group-reduce",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.table("balances", Consumed.with(Serdes.String(), Serdes.Long()),
                                    Materialized.as("balances"))
                            .groupBy((account, balance) -> KeyValue.pair(account.substring(0, 2), balance),
                                    Grouped.with("by-region", Serdes.String(), Serdes.Long()))
                            .reduce(Long::sum, (total, balance) -> total - balance,
                                    Materialized.as("region-totals"))
                            .toStream()
                            .to("region-totals", longsOut());
                    return builder.build();
                },
                List.of(longs("balances")),
                List.of(longs("region-totals")),
                i -> new Scenario.Event("balances", "eu-" + (i % 1000), null, i));
    }

    /** Counts in tumbling 10 s windows with 2 s grace, one final result per window. */
    static Scenario suppressWindowClose() {
        return new Scenario(
                "suppress-window-close",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(2)))
                            .count()
                            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                            .toStream()
                            .to("final-counts", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("final-counts",
                        JsonCodec.timeWindowedString(10_000), JsonCodec.LONG)),
                Catalog::click);
    }

    /** A table's updates held for 5 s of stream time after each key's first held update. */
    static Scenario suppressTimeLimit() {
        return new Scenario(
                "suppress-time-limit",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.table("prices", Consumed.with(Serdes.String(), Serdes.Long()))
                            .suppress(Suppressed.untilTimeLimit(Duration.ofSeconds(5),
                                    Suppressed.BufferConfig.unbounded()))
                            .toStream()
                            .to("settled-prices", longsOut());
                    return builder.build();
                },
                List.of(longs("prices")),
                List.of(longs("settled-prices")),
                i -> new Scenario.Event("prices", "item-" + (i % 1000), null, i));
    }

    /** Orders joined with a global table of products by the product the order names. */
    static Scenario globalJoin(String kind) {
        return new Scenario(
                "global-join-" + kind,
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KStream<String, String> orders = builder.stream("orders", stringsIn());
                    GlobalKTable<String, String> products = builder.globalTable("products", stringsIn());
                    KStream<String, String> out = kind.equals("inner")
                            ? orders.join(products, (order, product) -> product, (o, p) -> o + ":" + p)
                            : orders.leftJoin(products, (order, product) -> product, (o, p) -> o + ":" + p);
                    out.to("priced-orders", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders"), strings("products")),
                List.of(strings("priced-orders")),
                Catalog::order);
    }

    /**
     * Some nodes named, some not, across sources, sinks, groupings, joins and tables: a name
     * takes an index as a generated one does, so the generated names after it do not move.
     */
    static Scenario namedMixed() {
        return new Scenario(
                "named-mixed",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KStream<String, String> kept = builder.stream("orders", stringsIn().withName("src"))
                            .filter((k, v) -> !v.isEmpty(), Named.as("keep"))
                            .mapValues(v -> v.toUpperCase(Locale.ROOT));
                    kept.to("upper-orders", stringsOut().withName("write-upper"));
                    kept.groupBy((k, v) -> v, Grouped.with("by-item", Serdes.String(), Serdes.String()))
                            .count()
                            .toStream(Named.as("counts-out"))
                            .to("item-counts", longsOut());
                    KTable<String, String> prices = builder.table("prices", stringsIn().withName("prices-in"));
                    KStream<String, String> payments = builder.stream("payments", stringsIn());
                    kept.join(payments, (o, p) -> o + "/" + p,
                                    JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(5)),
                                    StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String())
                                            .withName("pay"))
                            .to("paid", stringsOut());
                    kept.leftJoin(prices, (o, p) -> o + "@" + p,
                                    Joined.with(Serdes.String(), Serdes.String(), Serdes.String()).withName("priced"))
                            .to("priced", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders"), strings("payments"), strings("prices")),
                List.of(strings("upper-orders"), longs("item-counts"), strings("paid"), strings("priced")),
                Catalog::order);
    }

    /**
     * Counts in hopping windows (10 s every 5 s, 1 s grace) emitted once, when each window
     * closes; emissions are throttled to once a second of wall-clock time.
     */
    static Scenario emitOnWindowClose() {
        return new Scenario(
                "emit-on-window-close",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(1))
                                    .advanceBy(Duration.ofSeconds(5)))
                            .emitStrategy(EmitStrategy.onWindowClose())
                            .count()
                            .toStream()
                            .to("final-counts", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("final-counts",
                        JsonCodec.timeWindowedString(10_000), JsonCodec.LONG)),
                Catalog::click);
    }

    /** A table's values doubled, then the rows over 500 dropped (a table filter without a store). */
    static Scenario tableMapValues() {
        return new Scenario(
                "table-map-values",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.table("prices", Consumed.with(Serdes.String(), Serdes.Long()))
                            .mapValues(v -> v * 2)
                            .filterNot((k, v) -> v > 500)
                            .toStream()
                            .to("doubled-prices", longsOut());
                    return builder.build();
                },
                List.of(longs("prices")),
                List.of(longs("doubled-prices")),
                i -> new Scenario.Event("prices", "item-" + (i % 1000), null, i));
    }

    /** A stream re-keyed and read as a table (through a repartition), its updates out again. */
    static Scenario streamToTable() {
        return new Scenario(
                "stream-to-table",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("orders", stringsIn())
                            .selectKey((k, v) -> v)
                            .toTable(Materialized.<String, String, org.apache.kafka.streams.state.KeyValueStore<
                                            org.apache.kafka.common.utils.Bytes, byte[]>>as("last-order-by-item")
                                    .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                            .toStream()
                            .to("last-order-by-item", stringsOut());
                    return builder.build();
                },
                List.of(strings("orders")),
                List.of(strings("last-order-by-item")),
                Catalog::order);
    }

    /** Pages of each session joined by an aggregate and a merger (3 s gap, no grace). */
    static Scenario sessionAggregate() {
        return new Scenario(
                "session-aggregate",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofSeconds(3)))
                            .aggregate(() -> "", (k, v, agg) -> agg + v, (k, a, b) -> a + "|" + b,
                                    Materialized.with(Serdes.String(), Serdes.String()))
                            .toStream()
                            .to("session-pages", Produced.with(
                                    WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.String()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("session-pages",
                        JsonCodec.sessionWindowedString(), JsonCodec.STRING)),
                Catalog::click);
    }

    /** Sliding windows (5 s, 1 s grace) counted, each window emitted once when it closes. */
    static Scenario slidingEmitFinal() {
        return new Scenario(
                "sliding-emit-final",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                                    Duration.ofSeconds(5), Duration.ofSeconds(1)))
                            .emitStrategy(EmitStrategy.onWindowClose())
                            .count()
                            .toStream()
                            .to("sliding-final-counts", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 5_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("sliding-final-counts",
                        JsonCodec.timeWindowedString(5_000), JsonCodec.LONG)),
                Catalog::click);
    }

    /** Sessions (4 s gap, 1 s grace) reduced, each emitted once when it closes. */
    static Scenario sessionEmitFinal() {
        return new Scenario(
                "session-emit-final",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                                    Duration.ofSeconds(4), Duration.ofSeconds(1)))
                            .emitStrategy(EmitStrategy.onWindowClose())
                            .reduce((a, b) -> a + "+" + b, Materialized.as("final-sessions"))
                            .toStream()
                            .to("session-final-pages", Produced.with(
                                    WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.String()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("session-final-pages",
                        JsonCodec.sessionWindowedString(), JsonCodec.STRING)),
                Catalog::click);
    }

    /** Sliding windows (3 s, no grace) whose values are joined by reduce, records out of order. */
    static Scenario slidingReduce() {
        return new Scenario(
                "sliding-reduce",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                                    Duration.ofSeconds(3), Duration.ofSeconds(10)))
                            .reduce((a, b) -> a + "+" + b)
                            .toStream()
                            .to("sliding-trails", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 3_000), Serdes.String()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("sliding-trails",
                        JsonCodec.timeWindowedString(3_000), JsonCodec.STRING)),
                Catalog::click);
    }

    /** Sessions (3 s gap, 2 s grace) reduced: merged sessions' values joined by the reducer. */
    static Scenario sessionReduce() {
        return new Scenario(
                "session-reduce",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("clicks", stringsIn())
                            .groupByKey()
                            .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                                    Duration.ofSeconds(3), Duration.ofSeconds(2)))
                            .reduce((a, b) -> a + "+" + b)
                            .toStream()
                            .to("session-trails", Produced.with(
                                    WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.String()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("session-trails",
                        JsonCodec.sessionWindowedString(), JsonCodec.STRING)),
                Catalog::click);
    }

    /**
     * Records without a key, through operations that treat them differently: a count and a
     * table skip them; a left join with a stream and a left join with a table forward them at
     * once without a partner (as Kafka Streams does since 3.7, KIP-962); the join's other
     * side skips them.
     */
    static Scenario nullKeys() {
        return new Scenario(
                "null-keys",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KStream<String, String> clicks = builder.stream("clicks", stringsIn());
                    KStream<String, String> views = builder.stream("views", stringsIn());
                    KTable<String, String> users = builder.table("users", stringsIn());
                    clicks.groupByKey().count().toStream().to("click-counts", longsOut());
                    clicks.leftJoin(views, (c, v) -> c + "/" + v,
                                    JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(5)),
                                    StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                            .to("clicks-with-views", stringsOut());
                    clicks.leftJoin(users, (c, u) -> c + "@" + u).to("clicks-with-users", stringsOut());
                    return builder.build();
                },
                List.of(strings("clicks"), strings("views"), strings("users")),
                List.of(longs("click-counts"), strings("clicks-with-views"), strings("clicks-with-users")),
                i -> new Scenario.Event("clicks", "user-" + (i % 1000), "/page/" + (i % 17), i));
    }

    /**
     * Records without a key in windowed counts, which skip them before their time counts:
     * tumbling, session and sliding windows.
     */
    static Scenario nullKeysWindowed() {
        return new Scenario(
                "null-keys-windowed",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    KStream<String, String> clicks = builder.stream("clicks", stringsIn());
                    clicks.groupByKey()
                            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(2)))
                            .count()
                            .toStream()
                            .to("window-counts", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), Serdes.Long()));
                    clicks.groupByKey()
                            .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                                    Duration.ofSeconds(3), Duration.ofSeconds(1)))
                            .count()
                            .toStream()
                            .to("session-counts", Produced.with(
                                    WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
                    clicks.groupByKey()
                            .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                                    Duration.ofSeconds(5), Duration.ofSeconds(1)))
                            .count()
                            .toStream()
                            .to("sliding-counts", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 5_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("clicks")),
                List.of(new Scenario.Topic<>("window-counts",
                                JsonCodec.timeWindowedString(10_000), JsonCodec.LONG),
                        new Scenario.Topic<>("session-counts",
                                JsonCodec.sessionWindowedString(), JsonCodec.LONG),
                        new Scenario.Topic<>("sliding-counts",
                                JsonCodec.timeWindowedString(5_000), JsonCodec.LONG)),
                Catalog::click);
    }

    /**
     * Event time read from the value ({@code "<millis>|<page>"}) by a timestamp extractor,
     * counted in tumbling windows of 10 s: the record timestamps play no part.
     */
    static Scenario eventTimeInValue() {
        TimestampExtractor fromValue = (record, partitionTime) ->
                Long.parseLong(((String) record.value()).split("\\|")[0]);
        return new Scenario(
                "event-time-in-value",
                () -> {
                    StreamsBuilder builder = new StreamsBuilder();
                    builder.stream("readings", stringsIn().withTimestampExtractor(fromValue))
                            .groupByKey()
                            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(2)))
                            .count()
                            .toStream()
                            .to("readings-per-window", Produced.with(
                                    WindowedSerdes.timeWindowedSerdeFrom(String.class, 10_000), Serdes.Long()));
                    return builder.build();
                },
                List.of(strings("readings")),
                List.of(new Scenario.Topic<>("readings-per-window",
                        JsonCodec.timeWindowedString(10_000), JsonCodec.LONG)),
                i -> new Scenario.Event("readings", "sensor-" + (i % 10), (i * 1000) + "|" + i, 0));
    }

    /** Forwards the first value of each key; every 1,000 ms of stream time, the count of keys. */
    static final class FirstSeen implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;
        private KeyValueStore<String, String> seen;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.seen = context.getStateStore("seen");
            context.schedule(Duration.ofMillis(1000), PunctuationType.STREAM_TIME, ts -> {
                long n = 0;
                try (var all = seen.all()) {
                    while (all.hasNext()) {
                        all.next();
                        n++;
                    }
                }
                context.forward(new Record<>("keys-seen", Long.toString(n), ts));
            });
        }

        @Override
        public void process(Record<String, String> record) {
            if (seen.get(record.key()) == null) {
                seen.put(record.key(), record.value());
                context.forward(record);
            }
        }
    }
}
