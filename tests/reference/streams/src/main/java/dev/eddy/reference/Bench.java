package dev.eddy.reference;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;

/**
 * Measures a scenario on a real {@link KafkaStreams} instance against a broker: the scenario's
 * topics are created afresh, {@code records} generated inputs are produced, then the
 * application runs until it has committed every input offset. Prints one JSON line with the
 * figures.
 */
public final class Bench {
    private Bench() {}

    /** Runs the benchmark and prints its result line. */
    public static void run(Scenario scenario, String bootstrap, long records, int partitions, int threads)
            throws Exception {
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        List<String> inputs = scenario.inputs().stream().map(Scenario.Topic::name).toList();
        List<String> topics = new ArrayList<>(inputs);
        scenario.outputs().forEach(t -> topics.add(t.name()));

        try (Admin admin = Admin.create(common)) {
            recreateTopics(admin, topics, partitions);

            long produceStart = System.nanoTime();
            produce(scenario, bootstrap, records);
            double produceSeconds = (System.nanoTime() - produceStart) / 1e9;

            Map<TopicPartition, Long> ends = endOffsets(admin, inputs, partitions);
            String appId = "bench-" + scenario.name() + "-" + System.currentTimeMillis();
            Path stateDir = Files.createTempDirectory("streams-bench");
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
            props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
            props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

            long start = System.nanoTime();
            try (KafkaStreams streams = new KafkaStreams(scenario.topology().get(), props)) {
                streams.start();
                while (!committedUpTo(admin, appId, ends)) {
                    if (streams.state() == KafkaStreams.State.ERROR) {
                        throw new IllegalStateException("Kafka Streams failed");
                    }
                    Thread.sleep(20);
                }
                double seconds = (System.nanoTime() - start) / 1e9;
                System.out.printf(
                        "{\"scenario\":\"%s\",\"records\":%d,\"partitions\":%d,\"threads\":%d,"
                                + "\"produce_seconds\":%.3f,\"process_seconds\":%.3f,\"records_per_sec\":%.0f}%n",
                        scenario.name(), records, partitions, threads, produceSeconds, seconds,
                        records / seconds);
                streams.close(Duration.ofSeconds(30));
                streams.cleanUp();
            }
        }
    }

    private static void recreateTopics(Admin admin, List<String> topics, int partitions) throws Exception {
        try {
            admin.deleteTopics(topics).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                throw e;
            }
        }
        List<NewTopic> wanted = topics.stream().map(t -> new NewTopic(t, partitions, (short) 1)).toList();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            try {
                admin.createTopics(wanted).all().get();
                return;
            } catch (ExecutionException e) {
                // A deleted topic lingers for a moment; try again until it is gone.
                if (!(e.getCause() instanceof TopicExistsException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }

    private static void produce(Scenario scenario, String bootstrap, long records) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            for (long i = 0; i < records; i++) {
                Scenario.Event e = scenario.load().event(i);
                producer.send(new ProducerRecord<>(e.topic(), null, e.timestamp(), e.key(), e.value()));
            }
            producer.flush();
        }
    }

    private static Map<TopicPartition, Long> endOffsets(Admin admin, List<String> topics, int partitions)
            throws Exception {
        Map<TopicPartition, OffsetSpec> request = topics.stream()
                .flatMap(t -> java.util.stream.IntStream.range(0, partitions).mapToObj(p -> new TopicPartition(t, p)))
                .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result = admin.listOffsets(request).all().get();
        return result.entrySet().stream().filter(e -> e.getValue().offset() > 0)
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
    }

    private static boolean committedUpTo(Admin admin, String group, Map<TopicPartition, Long> ends)
            throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Set<TopicPartition> pending = ends.keySet().stream()
                .filter(tp -> committed.get(tp) == null || committed.get(tp).offset() < ends.get(tp))
                .collect(Collectors.toSet());
        return pending.isEmpty();
    }
}
