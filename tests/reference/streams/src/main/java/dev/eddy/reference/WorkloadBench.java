package dev.eddy.reference;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;

/**
 * The workloads of {@code eddy bench streams}, on a real {@link KafkaStreams} instance, with the
 * same input and the same measure: {@code records} keyed records of {@code valueSize} bytes over
 * {@code keys} keys ({@code key-<i mod keys>}) are produced to a fresh topic; the clock runs from
 * the application's RUNNING state until every input offset is committed. Prints one JSON line,
 * with the process's peak resident memory while the application ran ({@code peak_rss_mb},
 * sampled from {@code /proc/self/status}; the producer's memory is collected before it starts).
 *
 * <ul>
 *   <li>{@code stateless}: {@code filter(v not empty).mapValues(v -> length)};
 *   <li>{@code count}: {@code groupByKey().count()} in a RocksDB store;
 *   <li>{@code windowed}: {@code groupByKey().windowedBy(1 minute tumbling).count()}.
 * </ul>
 */
public final class WorkloadBench {
    private WorkloadBench() {}

    /** What one run measures. */
    public record Load(
            String workload,
            String bootstrap,
            long records,
            long keys,
            int valueSize,
            int partitions,
            int threads,
            String guarantee,
            int commitIntervalMs,
            boolean transactionalStores) {}

    /** The topology of {@code workload}, from {@code input} to {@code output}. */
    static Topology topology(String workload, String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, byte[]> stream =
                builder.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()));
        switch (workload) {
            case "stateless" -> stream.filter((k, v) -> v.length > 0)
                    .mapValues(v -> (long) v.length)
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "count" -> stream.groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
                    .count(Materialized.as("bench-counts"))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "windowed" -> stream.groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(1)))
                    .count(Materialized.as("bench-window-counts"))
                    .toStream()
                    .to(output, Produced.with(
                            WindowedSerdes.timeWindowedSerdeFrom(String.class, 60_000L), Serdes.Long()));
            default -> throw new IllegalArgumentException(
                    "workload " + workload + ": stateless, count or windowed");
        }
        return builder.build();
    }

    /** Runs the benchmark and prints its result line. */
    public static void run(Load load) throws Exception {
        String runId = Long.toHexString(System.nanoTime());
        String input = "ks-bench-in-" + runId;
        String output = "ks-bench-out-" + runId;
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, load.bootstrap());
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(
                    new NewTopic(input, load.partitions(), (short) 1),
                    new NewTopic(output, load.partitions(), (short) 1))).all().get();
            produce(load, input);
            // The producer's buffers and keys are garbage now: a full collection gives their
            // heap back (G1 shrinks the heap after it), so that it is not counted as the
            // application's memory.
            System.gc();
            Map<TopicPartition, Long> ends = endOffsets(admin, input, load.partitions());

            String appId = "ks-bench-" + runId;
            Path stateDir = Files.createTempDirectory("ks-bench");
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, load.bootstrap());
            props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
            props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, load.guarantee());
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, load.commitIntervalMs());
            props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, load.threads());
            props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
            if (load.transactionalStores()) {
                props.put("enable.transactional.statestores", "true");
            }
            KafkaStreams streams = new KafkaStreams(topology(load.workload(), input, output), props);
            long peakRssKib = residentKib();
            streams.start();
            long deadline = System.nanoTime() + Duration.ofMinutes(10).toNanos();
            while (streams.state() != KafkaStreams.State.RUNNING) {
                check(streams, deadline);
                Thread.sleep(5);
                peakRssKib = Math.max(peakRssKib, residentKib());
            }
            long start = System.nanoTime();
            while (!committedUpTo(admin, appId, ends)) {
                check(streams, deadline);
                Thread.sleep(5);
                peakRssKib = Math.max(peakRssKib, residentKib());
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf(
                    "{\"test\":\"kafka-streams-%s\",\"guarantee\":\"%s\",\"records\":%d,\"seconds\":%.3f,"
                            + "\"records_per_sec\":%.0f,\"partitions\":%d,\"threads\":%d,\"peak_rss_mb\":%d}%n",
                    load.workload(), load.guarantee(), load.records(), seconds, load.records() / seconds,
                    load.partitions(), load.threads(), peakRssKib / 1024);
            streams.close(Duration.ofSeconds(60));
            streams.cleanUp();
            try (Stream<Path> walk = Files.walk(stateDir)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
            admin.deleteTopics(List.of(input, output)).all().get();
        }
    }

    /** The process's resident memory now, in KiB ({@code VmRSS}); 0 where it cannot be read. */
    private static long residentKib() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (java.io.IOException | NumberFormatException e) {
            return 0;
        }
        return 0;
    }

    private static void check(KafkaStreams streams, long deadline) {
        if (streams.state() == KafkaStreams.State.ERROR) {
            throw new IllegalStateException("Kafka Streams failed");
        }
        if (System.nanoTime() > deadline) {
            throw new IllegalStateException("Kafka Streams took longer than 10 minutes");
        }
    }

    private static void produce(Load load, String topic) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, load.bootstrap());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
        props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, 128L << 20);
        byte[] value = new byte[load.valueSize()];
        for (int i = 0; i < value.length; i++) {
            value[i] = (byte) ('a' + i % 26);
        }
        long keys = Math.max(1, load.keys());
        byte[][] keyBytes = new byte[(int) Math.min(keys, Integer.MAX_VALUE)][];
        for (int k = 0; k < keyBytes.length; k++) {
            keyBytes[k] = ("key-" + k).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        }
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (long i = 0; i < load.records(); i++) {
                producer.send(new ProducerRecord<>(topic, keyBytes[(int) (i % keyBytes.length)], value));
            }
            producer.flush();
        }
    }

    private static Map<TopicPartition, Long> endOffsets(Admin admin, String topic, int partitions)
            throws Exception {
        Map<TopicPartition, OffsetSpec> request = IntStream.range(0, partitions)
                .mapToObj(p -> new TopicPartition(topic, p))
                .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
        return admin.listOffsets(request).all().get().entrySet().stream()
                .filter(e -> e.getValue().offset() > 0)
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
    }

    private static boolean committedUpTo(Admin admin, String group, Map<TopicPartition, Long> ends)
            throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        return ends.entrySet().stream().allMatch(e -> committed.get(e.getKey()) != null
                && committed.get(e.getKey()).offset() >= e.getValue());
    }
}
