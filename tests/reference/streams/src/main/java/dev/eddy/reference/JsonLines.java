package dev.eddy.reference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Reads and writes JSON Lines files: one JSON object a line, blank lines ignored. */
public final class JsonLines {
    private JsonLines() {}

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** Reads every non-blank line of the file as JSON. */
    public static List<JsonNode> read(Path file) {
        List<JsonNode> lines = new ArrayList<>();
        try {
            int n = 0;
            for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
                n++;
                if (line.isBlank()) {
                    continue;
                }
                try {
                    lines.add(MAPPER.readTree(line));
                } catch (IOException e) {
                    throw new IllegalArgumentException(file + ":" + n + ": not JSON: " + e.getMessage(), e);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return lines;
    }

    /** The compact one-line text of a JSON value. */
    public static String format(JsonNode node) {
        try {
            return MAPPER.writeValueAsString(node);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Writes one line per value. */
    public static void write(Path file, List<? extends JsonNode> lines) {
        StringBuilder text = new StringBuilder();
        for (JsonNode line : lines) {
            text.append(format(line)).append('\n');
        }
        try {
            Files.writeString(file, text, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
