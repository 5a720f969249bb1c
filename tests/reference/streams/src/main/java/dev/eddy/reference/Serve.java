package dev.eddy.reference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs many inputs through {@link Driver} in one JVM, one request a line, for callers that run
 * thousands of inputs (eddy's randomized differential test): a JVM start costs about a second,
 * a driver run a few milliseconds once the JIT has warmed.
 *
 * <p>Each line of standard input is {@code {"scenario": NAME, "input": [LINE, ...]}} with input
 * lines as {@code driver} reads them from a file; each answer, one line of standard output in
 * the same order, is {@code {"output": [LINE, ...]}} or, where the scenario is unknown or the
 * topology throws, {@code {"error": MESSAGE}}. The process ends at the end of its input.
 */
final class Serve {
    private Serve() {}

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** Answers requests from standard input until it closes. */
    static void run() throws IOException {
        // Topologies are built once per scenario; TopologyTestDriver only reads them.
        Map<String, Scenario> scenarios = new ConcurrentHashMap<>();
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            out.println(JsonLines.format(answer(line, scenarios)));
            out.flush();
        }
    }

    private static ObjectNode answer(String request, Map<String, Scenario> scenarios) {
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        try {
            JsonNode parsed = MAPPER.readTree(request);
            JsonNode name = parsed.get("scenario");
            JsonNode input = parsed.get("input");
            if (name == null || !name.isTextual() || input == null || !input.isArray()) {
                throw new IllegalArgumentException("a request is {\"scenario\": NAME, \"input\": [...]}");
            }
            Scenario scenario = scenarios.computeIfAbsent(name.asText(), Catalog::get);
            List<JsonNode> lines = new ArrayList<>();
            input.forEach(lines::add);
            ArrayNode output = answer.putArray("output");
            Driver.run(scenario, lines).forEach(output::add);
        } catch (Exception e) {
            answer.removeAll();
            answer.put("error", e.toString());
        }
        return answer;
    }
}
