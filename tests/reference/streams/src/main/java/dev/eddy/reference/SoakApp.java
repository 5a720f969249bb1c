package dev.eddy.reference;

import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;

/**
 * eddy's exactly-once soak application ({@code tests/src/bin/eos-soak-app.rs}) on Kafka Streams,
 * for the latency benchmark ({@code tests/reference/bench-latency --apps kafka-streams}): reads
 * {@code data} (string keys, 8-byte big-endian longs) and writes {@code echo} (the input
 * unchanged), {@code min} and {@code sum} per key, and, after a {@code repartition()}, {@code max}
 * and {@code cnt} per key, every update emitted (record cache off), application id
 * {@code eos-soak}. The guarantee is {@code exactly_once_v2} or {@code at_least_once}, the commit
 * interval Kafka Streams' default for it. Prints {@code running} when RUNNING; runs until stopped.
 */
public final class SoakApp {
    private SoakApp() {}

    /** The soak topology, as eddy's soak application builds it. */
    static Topology topology() {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Long> data = builder.stream("data", Consumed.with(Serdes.String(), Serdes.Long()));
        Produced<String, Long> longs = Produced.with(Serdes.String(), Serdes.Long());
        data.to("echo", longs);
        KGroupedStream<String, Long> grouped = data.groupByKey(Grouped.with(Serdes.String(), Serdes.Long()));
        grouped.aggregate(() -> Long.MAX_VALUE, (k, v, min) -> Math.min(v, min),
                        Materialized.with(Serdes.String(), Serdes.Long()))
                .toStream()
                .to("min", longs);
        grouped.aggregate(() -> 0L, (k, v, sum) -> sum + v, Materialized.with(Serdes.String(), Serdes.Long()))
                .toStream()
                .to("sum", longs);
        KGroupedStream<String, Long> regrouped = data
                .repartition(Repartitioned.with(Serdes.String(), Serdes.Long()))
                .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()));
        regrouped.aggregate(() -> Long.MIN_VALUE, (k, v, max) -> Math.max(v, max),
                        Materialized.with(Serdes.String(), Serdes.Long()))
                .toStream()
                .to("max", longs);
        regrouped.count(Materialized.with(Serdes.String(), Serdes.Long()))
                .toStream()
                .to("cnt", longs);
        return builder.build();
    }

    /** Runs the application until the JVM stops. */
    public static void run(String bootstrap, String stateDir, String guarantee) throws InterruptedException {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "eos-soak");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, switch (guarantee) {
            case "exactly_once_v2" -> StreamsConfig.EXACTLY_ONCE_V2;
            case "at_least_once" -> StreamsConfig.AT_LEAST_ONCE;
            default -> throw new IllegalArgumentException("guarantee " + guarantee);
        });
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        KafkaStreams streams = new KafkaStreams(topology(), props);
        CountApp.runUntilStopped(streams);
    }
}
