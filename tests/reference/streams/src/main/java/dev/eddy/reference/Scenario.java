package dev.eddy.reference;

import java.util.List;
import java.util.function.Supplier;
import org.apache.kafka.streams.Topology;

/**
 * One named topology of the catalog: how to build it, the topics it reads and the topics it
 * writes, and how to generate load for it in a throughput run.
 */
public record Scenario(
        String name,
        Supplier<Topology> topology,
        List<Topic<?, ?>> inputs,
        List<Topic<?, ?>> outputs,
        LoadGenerator load) {

    /** A topic with the codecs of its keys and values. */
    public record Topic<K, V>(String name, JsonCodec<K> key, JsonCodec<V> value) {}

    /** Produces the i-th input record of a throughput run. */
    public interface LoadGenerator {
        /** The topic, key, value and timestamp of record {@code i}. */
        Event event(long i);
    }

    /** One generated input record. */
    public record Event(String topic, String key, String value, long timestamp) {}

    /** The input topic with this name. */
    public Topic<?, ?> input(String topic) {
        return inputs.stream().filter(t -> t.name().equals(topic)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException(
                        "scenario " + name + " has no input topic " + topic));
    }
}
