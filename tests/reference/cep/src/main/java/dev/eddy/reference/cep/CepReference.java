package dev.eddy.reference.cep;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.functions.TimedOutPartialMatchHandler;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.IterativeCondition;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Runs every scenario of the catalog ({@code catalog/<name>/input.jsonl}, one event
 * {@code {"key", "type", "at"}} per line) through Flink CEP: a bounded, keyed, event-time job
 * in a local environment, the pattern of the scenario as eddy's {@code scenarios.rs} declares
 * it. The matches and timed-out partial matches are normalized as eddy's side normalizes them
 * (by key; a key's matches in the order Flink emitted them, then its timeouts sorted) and
 * compared with {@code expected.jsonl}, or written there with {@code --write}.
 *
 * <p>Usage: {@code CepReference CATALOG_DIR [--write]}; exits 1 when a scenario differs.
 */
public final class CepReference {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** An event of an input file. */
  public static class Event {
    public String key;
    public String type;
    public long at;

    public Event() {}
  }

  private static SimpleCondition<Event> is(String type) {
    return SimpleCondition.of(e -> e.type.equals(type));
  }

  private static Pattern<Event, Event> begin(String name, String type) {
    return Pattern.<Event>begin(name).where(is(type));
  }

  private static Pattern<Event, Event> skipping(AfterMatchSkipStrategy skip) {
    return Pattern.<Event>begin("a", skip).where(is("a")).oneOrMore().followedBy("b").where(is("b"));
  }

  /** At most one "b" taken before: the condition sees the partial match's events. */
  static final class FewerThanTwoB extends IterativeCondition<Event> {
    @Override
    public boolean filter(Event e, Context<Event> ctx) throws Exception {
      if (!e.type.equals("b")) {
        return false;
      }
      int taken = 0;
      for (Event ignored : ctx.getEventsForPattern("b")) {
        taken++;
      }
      return taken < 2;
    }
  }

  static Pattern<Event, ?> holdRelease() {
    return Pattern.<Event>begin("hold", AfterMatchSkipStrategy.skipPastLastEvent())
        .where(is("held"))
        .next("release")
        .where(is("released"))
        .next("hold-again")
        .where(is("held"))
        .next("release-again")
        .where(is("released"))
        .within(Duration.ofMinutes(10));
  }

  static Pattern<Event, ?> pattern(String name) {
    Duration second = Duration.ofSeconds(1);
    switch (name) {
      case "strict":
        return begin("a", "a").next("b").where(is("b"));
      case "relaxed":
        return begin("a", "a").followedBy("b").where(is("b"));
      case "any":
        return begin("a", "a").followedByAny("b").where(is("b"));
      case "times":
        return begin("a", "a").followedBy("b").where(is("b")).times(2).followedBy("c").where(is("c"));
      case "times-consecutive":
        return begin("a", "a").followedBy("b").where(is("b")).times(2).consecutive()
            .followedBy("c").where(is("c"));
      case "times-range":
        return begin("a", "a").followedBy("b").where(is("b")).times(1, 3)
            .followedBy("c").where(is("c"));
      case "times-range-greedy":
        return begin("a", "a").followedBy("b").where(is("b")).times(1, 3).greedy()
            .followedBy("c").where(is("c"));
      case "one-or-more":
        return begin("a", "a").followedBy("b").where(is("b")).oneOrMore()
            .followedBy("c").where(is("c"));
      case "one-or-more-greedy":
        return begin("a", "a").followedBy("b").where(is("b")).oneOrMore().greedy()
            .followedBy("c").where(is("c"));
      case "combinations":
        return begin("a", "a").followedBy("b").where(is("b")).timesOrMore(2).allowCombinations()
            .followedBy("c").where(is("c"));
      case "optional":
        return begin("a", "a").followedBy("b").where(is("b")).optional()
            .followedBy("c").where(is("c"));
      case "until":
        return begin("a", "a").followedBy("b").where(is("b")).oneOrMore().until(is("x"))
            .followedBy("c").where(is("c"));
      case "not-next":
        return begin("a", "a").notNext("not-b").where(is("b")).followedBy("c").where(is("c"));
      case "not-followed-by":
        return begin("a", "a").notFollowedBy("not-b").where(is("b"))
            .followedBy("c").where(is("c"));
      case "not-followed-by-end":
        return begin("a", "a").notFollowedBy("not-b").where(is("b")).within(second);
      case "within":
        return begin("a", "a").followedBy("b").where(is("b")).within(second);
      case "skip-none":
        return skipping(AfterMatchSkipStrategy.noSkip());
      case "skip-to-next":
        return skipping(AfterMatchSkipStrategy.skipToNext());
      case "skip-past-last":
        return skipping(AfterMatchSkipStrategy.skipPastLastEvent());
      case "skip-to-first":
        return skipping(AfterMatchSkipStrategy.skipToFirst("a"));
      case "skip-to-last":
        return skipping(AfterMatchSkipStrategy.skipToLast("a"));
      case "iterative":
        return begin("a", "a").followedBy("b").where(new FewerThanTwoB()).oneOrMore()
            .followedBy("c").where(is("c"));
      case "group":
        return Pattern.begin(begin("g1", "a").next("g2").where(is("b"))).times(2)
            .followedBy("c").where(is("c"));
      case "out-of-order":
        return begin("a", "a").followedBy("b").where(is("b")).within(Duration.ofSeconds(2));
      case "many-keys":
      case "hold-release":
        return holdRelease();
      default:
        throw new IllegalArgumentException("no scenario " + name);
    }
  }

  static long latenessMs(String name) {
    return name.equals("out-of-order") ? 500 : 0;
  }

  static ArrayNode steps(Map<String, List<Event>> match) {
    ArrayNode steps = JSON.createArrayNode();
    for (Map.Entry<String, List<Event>> step : match.entrySet()) {
      ArrayNode events = JSON.createArrayNode();
      for (Event e : step.getValue()) {
        events.add(JSON.createArrayNode().add(e.type).add(e.at));
      }
      steps.add(JSON.createArrayNode().add(step.getKey()).add(events));
    }
    return steps;
  }

  static String line(String kind, Map<String, List<Event>> match) {
    String key = match.values().stream().flatMap(List::stream).findFirst().map(e -> e.key)
        .orElse("");
    ObjectNode node = JSON.createObjectNode();
    node.put("key", key);
    node.put("kind", kind);
    node.set("steps", steps(match));
    return node.toString();
  }

  /** Emits matches, and timed-out partial matches to a side output. */
  static final class Found extends PatternProcessFunction<Event, String>
      implements TimedOutPartialMatchHandler<Event> {
    private final OutputTag<String> timeouts;

    Found(OutputTag<String> timeouts) {
      this.timeouts = timeouts;
    }

    @Override
    public void processMatch(Map<String, List<Event>> match, Context ctx, Collector<String> out) {
      out.collect(line("match", match));
    }

    @Override
    public void processTimedOutMatch(Map<String, List<Event>> match, Context ctx) {
      ctx.output(timeouts, line("timeout", match));
    }
  }

  static List<String> run(StreamExecutionEnvironment env, String name, List<Event> events)
      throws Exception {
    long lateness = latenessMs(name);
    DataStream<Event> input = env.fromData(events)
        .assignTimestampsAndWatermarks(
            WatermarkStrategy.<Event>forBoundedOutOfOrderness(Duration.ofMillis(lateness))
                .withTimestampAssigner((e, ts) -> e.at));
    OutputTag<String> timeouts = new OutputTag<String>("timeouts") {};
    SingleOutputStreamOperator<String> matches = CEP.pattern(input.keyBy(e -> e.key), pattern(name))
        .inEventTime()
        .process(new Found(timeouts));
    List<String> found = new ArrayList<>();
    try (CloseableIterator<String> it =
        matches.union(matches.getSideOutput(timeouts)).executeAndCollect(name)) {
      it.forEachRemaining(found::add);
    }
    return found;
  }

  /** By key; a key's matches in emission order, then its timeouts sorted. */
  static List<String> normalize(List<String> found) throws Exception {
    Map<String, List<JsonNode>> byKey = new TreeMap<>();
    for (String l : found) {
      JsonNode n = JSON.readTree(l);
      byKey.computeIfAbsent(n.get("key").asText(), k -> new ArrayList<>()).add(n);
    }
    List<String> lines = new ArrayList<>();
    for (List<JsonNode> nodes : byKey.values()) {
      for (JsonNode n : nodes) {
        if (n.get("kind").asText().equals("match")) {
          lines.add(n.toString());
        }
      }
      List<String> timedOut = new ArrayList<>();
      for (JsonNode n : nodes) {
        if (n.get("kind").asText().equals("timeout")) {
          timedOut.add(n.toString());
        }
      }
      timedOut.sort(Comparator.naturalOrder());
      lines.addAll(timedOut);
    }
    return lines;
  }

  public static void main(String[] args) throws Exception {
    Path catalog = Paths.get(args[0]);
    boolean write = args.length > 1 && args[1].equals("--write");
    List<String> names;
    try (Stream<Path> dirs = Files.list(catalog)) {
      names = dirs.filter(d -> Files.exists(d.resolve("input.jsonl")))
          .map(d -> d.getFileName().toString())
          .sorted()
          .collect(Collectors.toList());
    }
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(1);
    int failures = 0;
    for (String name : names) {
      List<Event> events = new ArrayList<>();
      for (String l : Files.readAllLines(catalog.resolve(name).resolve("input.jsonl"))) {
        if (!l.isBlank()) {
          events.add(JSON.readValue(l, Event.class));
        }
      }
      List<String> lines = normalize(run(env, name, events));
      Path expected = catalog.resolve(name).resolve("expected.jsonl");
      String text = lines.stream().map(l -> l + "\n").collect(Collectors.joining());
      if (write) {
        Files.write(expected, text.getBytes(StandardCharsets.UTF_8));
        System.out.printf("%s: %d lines written%n", name, lines.size());
        continue;
      }
      String have = Files.exists(expected) ? Files.readString(expected) : "";
      if (have.equals(text)) {
        System.out.printf("%s: %d lines, as expected.jsonl%n", name, lines.size());
      } else {
        failures++;
        System.out.printf("%s: Flink CEP gives%n%s--- expected.jsonl has%n%s%n", name, text, have);
      }
    }
    System.out.printf("%d scenarios, %d differ%n", names.size(), failures);
    System.exit(failures == 0 ? 0 : 1);
  }
}
