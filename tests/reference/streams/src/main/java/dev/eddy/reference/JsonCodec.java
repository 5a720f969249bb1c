package dev.eddy.reference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;

/**
 * How a key or value of one Java type is written in the catalog's JSON Lines files, together
 * with the serde that the topology uses for it on the topic.
 */
public interface JsonCodec<T> {
    /** The serde of this type on a topic. */
    Serde<T> serde();

    /** Reads a non-null JSON value as this type. */
    T read(JsonNode json);

    /** Writes a non-null value as JSON. */
    JsonNode write(T value);

    /** Reads a JSON value, mapping JSON null to null. */
    default T readNullable(JsonNode json) {
        return json == null || json.isNull() ? null : read(json);
    }

    /** Writes a value, mapping null to JSON null. */
    default JsonNode writeNullable(T value) {
        return value == null ? JsonNodeFactory.instance.nullNode() : write(value);
    }

    /** UTF-8 strings, written as JSON strings. */
    JsonCodec<String> STRING = new JsonCodec<>() {
        public Serde<String> serde() { return Serdes.String(); }
        public String read(JsonNode json) { return json.asText(); }
        public JsonNode write(String value) { return JsonNodeFactory.instance.textNode(value); }
    };

    /** 64-bit integers (Kafka's 8-byte big-endian LongSerde), written as JSON numbers. */
    JsonCodec<Long> LONG = new JsonCodec<>() {
        public Serde<Long> serde() { return Serdes.Long(); }
        public Long read(JsonNode json) { return json.asLong(); }
        public JsonNode write(Long value) { return JsonNodeFactory.instance.numberNode(value); }
    };

    /**
     * String keys of time windows of the given size, written as
     * {@code {"key": "alice", "start": 0, "end": 10000}}.
     */
    static JsonCodec<Windowed<String>> timeWindowedString(long windowSizeMs) {
        return new JsonCodec<>() {
            public Serde<Windowed<String>> serde() {
                return WindowedSerdes.timeWindowedSerdeFrom(String.class, windowSizeMs);
            }
            public Windowed<String> read(JsonNode json) {
                throw new UnsupportedOperationException("windowed keys are only read from outputs");
            }
            public JsonNode write(Windowed<String> value) {
                ObjectNode node = JsonNodeFactory.instance.objectNode();
                node.put("key", value.key());
                node.put("start", value.window().start());
                node.put("end", value.window().end());
                return node;
            }
        };
    }

    /** String keys of session windows, written as {@code {"key": "alice", "start": 0, "end": 900}}. */
    static JsonCodec<Windowed<String>> sessionWindowedString() {
        return new JsonCodec<>() {
            public Serde<Windowed<String>> serde() {
                return WindowedSerdes.sessionWindowedSerdeFrom(String.class);
            }
            public Windowed<String> read(JsonNode json) {
                throw new UnsupportedOperationException("windowed keys are only read from outputs");
            }
            public JsonNode write(Windowed<String> value) {
                ObjectNode node = JsonNodeFactory.instance.objectNode();
                node.put("key", value.key());
                node.put("start", value.window().start());
                node.put("end", value.window().end());
                return node;
            }
        };
    }
}
