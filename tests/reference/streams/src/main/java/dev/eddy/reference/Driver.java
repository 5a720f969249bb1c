package dev.eddy.reference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Runs a scenario through Kafka Streams' {@link TopologyTestDriver}: each input line is piped
 * in, and after each one every output topic is drained, in the order the scenario lists them.
 *
 * <p>Input lines are records {@code {"topic", "key", "value", "timestamp", "headers"?}} or
 * wall-clock steps {@code {"advance_wall_clock_ms": N}}. Output lines are records
 * {@code {"topic", "key", "value", "timestamp", "headers"?}}. Caching is off, so every update is
 * emitted; the driver starts at wall-clock time 0.
 */
public final class Driver {
    private Driver() {}

    /**
     * The state directory of every driver this process runs: one of its own, so that several
     * processes can run drivers of the same scenario at once without sharing state.
     */
    private static final Path STATE_DIR = createStateDir();

    private static Path createStateDir() {
        try {
            Path dir = Files.createTempDirectory("eddy-reference-state-");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir)));
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // Best effort at exit: the directory is under the system's temporary directory.
        }
    }

    /** Runs the scenario over the input lines and returns the output lines. */
    public static List<ObjectNode> run(Scenario scenario, List<JsonNode> input) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "reference-" + scenario.name());
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, STATE_DIR.toString());
        List<ObjectNode> output = new ArrayList<>();
        try (TopologyTestDriver driver =
                new TopologyTestDriver(scenario.topology().get(), props, Instant.ofEpochMilli(0))) {
            Map<String, Piped<?, ?>> inputs = new HashMap<>();
            List<Drained<?, ?>> outputs = new ArrayList<>();
            for (Scenario.Topic<?, ?> topic : scenario.outputs()) {
                outputs.add(Drained.of(driver, topic));
            }
            for (JsonNode line : input) {
                if (line.has("advance_wall_clock_ms")) {
                    driver.advanceWallClockTime(Duration.ofMillis(line.get("advance_wall_clock_ms").asLong()));
                } else {
                    String topic = line.get("topic").asText();
                    inputs.computeIfAbsent(topic, t -> Piped.of(driver, scenario.input(t))).pipe(line);
                }
                for (Drained<?, ?> out : outputs) {
                    out.drainInto(output);
                }
            }
        }
        return output;
    }

    /** An input topic of the driver with its JSON codecs. */
    private record Piped<K, V>(TestInputTopic<K, V> topic, Scenario.Topic<K, V> spec) {
        static <K, V> Piped<K, V> of(TopologyTestDriver driver, Scenario.Topic<K, V> spec) {
            return new Piped<>(driver.createInputTopic(spec.name(),
                    spec.key().serde().serializer(), spec.value().serde().serializer()), spec);
        }

        void pipe(JsonNode line) {
            RecordHeaders headers = new RecordHeaders();
            JsonNode h = line.get("headers");
            if (h != null) {
                for (Iterator<Map.Entry<String, JsonNode>> it = h.fields(); it.hasNext(); ) {
                    Map.Entry<String, JsonNode> e = it.next();
                    headers.add(e.getKey(), e.getValue().isNull() ? null
                            : e.getValue().asText().getBytes(StandardCharsets.UTF_8));
                }
            }
            topic.pipeInput(new TestRecord<>(
                    spec.key().readNullable(line.get("key")),
                    spec.value().readNullable(line.get("value")),
                    headers,
                    line.get("timestamp").asLong()));
        }
    }

    /** An output topic of the driver with its JSON codecs. */
    private record Drained<K, V>(TestOutputTopic<K, V> topic, Scenario.Topic<K, V> spec) {
        static <K, V> Drained<K, V> of(TopologyTestDriver driver, Scenario.Topic<K, V> spec) {
            return new Drained<>(driver.createOutputTopic(spec.name(),
                    spec.key().serde().deserializer(), spec.value().serde().deserializer()), spec);
        }

        void drainInto(List<ObjectNode> output) {
            for (TestRecord<K, V> r : topic.readRecordsToList()) {
                ObjectNode line = JsonNodeFactory.instance.objectNode();
                line.put("topic", spec.name());
                line.set("key", spec.key().writeNullable(r.key()));
                line.set("value", spec.value().writeNullable(r.value()));
                line.put("timestamp", r.timestamp());
                if (r.headers().toArray().length > 0) {
                    ObjectNode headers = line.putObject("headers");
                    for (Header header : r.headers()) {
                        headers.put(header.key(), header.value() == null ? null
                                : new String(header.value(), StandardCharsets.UTF_8));
                    }
                }
                output.add(line);
            }
        }
    }
}
