package dev.eddy.reference;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;

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
        for (Scenario s : List.of(wordCount(), windowedCount())) {
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
}
