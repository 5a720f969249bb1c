package dev.eddy.reference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.util.List;

/**
 * The command line of the Kafka Streams reference:
 *
 * <pre>
 *   list                                   names of the catalog's scenarios
 *   describe NAME                          Topology.describe() of a scenario
 *   driver NAME INPUT.jsonl OUTPUT.jsonl   run through TopologyTestDriver
 *   serve                                  many driver runs in one JVM, one request a line
 *   bench NAME --bootstrap HOST:PORT [--records N] [--partitions P] [--threads T]
 *                                          throughput of a real KafkaStreams instance
 *   workload-bench WORKLOAD --bootstrap HOST:PORT [--records N] [--keys K] [--value-size B]
 *       [--partitions P] [--threads T] [--guarantee G] [--commit-interval-ms C]
 *       [--transactional-stores]
 *                                          eddy bench streams' workloads (see WorkloadBench)
 *   count-app --bootstrap HOST:PORT --state-dir DIR --input T --output T --application-id ID
 *       [--transactional-stores]           the count workload as an application (see CountApp)
 *   soak-app --bootstrap HOST:PORT --state-dir DIR [--guarantee G]
 *                                          eddy's exactly-once soak application (see SoakApp)
 * </pre>
 */
public final class Main {
    private Main() {}

    /** Entry point. */
    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        switch (args[0]) {
            case "list" -> Catalog.all().keySet().forEach(System.out::println);
            case "describe" -> {
                need(args, 2);
                System.out.print(Catalog.get(args[1]).topology().get().describe());
            }
            case "driver" -> {
                need(args, 4);
                List<JsonNode> input = JsonLines.read(Path.of(args[2]));
                List<ObjectNode> output = Driver.run(Catalog.get(args[1]), input);
                JsonLines.write(Path.of(args[3]), output);
            }
            case "serve" -> {
                need(args, 1);
                Serve.run();
            }
            case "bench" -> {
                if (args.length < 2 || args.length % 2 != 0) {
                    usage();
                }
                String bootstrap = null;
                long records = 1_000_000;
                int partitions = 2;
                int threads = 1;
                for (int i = 2; i < args.length; i += 2) {
                    switch (args[i]) {
                        case "--bootstrap" -> bootstrap = args[i + 1];
                        case "--records" -> records = Long.parseLong(args[i + 1]);
                        case "--partitions" -> partitions = Integer.parseInt(args[i + 1]);
                        case "--threads" -> threads = Integer.parseInt(args[i + 1]);
                        default -> usage();
                    }
                }
                if (bootstrap == null) {
                    usage();
                }
                Bench.run(Catalog.get(args[1]), bootstrap, records, partitions, threads);
            }
            case "workload-bench" -> WorkloadBench.run(workloadLoad(args));
            case "count-app" -> countApp(args);
            case "soak-app" -> soakApp(args);
            default -> usage();
        }
    }

    private static void countApp(String[] args) throws InterruptedException {
        java.util.Map<String, String> flags = new java.util.HashMap<>();
        boolean transactionalStores = false;
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--transactional-stores")) {
                transactionalStores = true;
            } else if (i + 1 < args.length && args[i].startsWith("--")) {
                flags.put(args[i], args[++i]);
            } else {
                usage();
            }
        }
        for (String required : List.of("--bootstrap", "--state-dir", "--input", "--output", "--application-id")) {
            if (!flags.containsKey(required)) {
                usage();
            }
        }
        CountApp.run(flags.get("--bootstrap"), flags.get("--state-dir"), flags.get("--input"),
                flags.get("--output"), flags.get("--application-id"), transactionalStores);
    }

    private static void soakApp(String[] args) throws InterruptedException {
        java.util.Map<String, String> flags = new java.util.HashMap<>(java.util.Map.of("--guarantee", "exactly_once_v2"));
        for (int i = 1; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                usage();
            }
            flags.put(args[i], args[i + 1]);
        }
        if (args.length % 2 == 0 || !flags.containsKey("--bootstrap") || !flags.containsKey("--state-dir")) {
            usage();
        }
        SoakApp.run(flags.get("--bootstrap"), flags.get("--state-dir"), flags.get("--guarantee"));
    }

    private static WorkloadBench.Load workloadLoad(String[] args) {
        if (args.length < 2) {
            usage();
        }
        String bootstrap = null;
        long records = 1_000_000;
        long keys = 100_000;
        int valueSize = 100;
        int partitions = 4;
        int threads = 1;
        String guarantee = "exactly_once_v2";
        int commitIntervalMs = 100;
        boolean transactionalStores = false;
        for (int i = 2; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("--transactional-stores")) {
                transactionalStores = true;
                continue;
            }
            if (i + 1 >= args.length) {
                usage();
            }
            String value = args[++i];
            switch (flag) {
                case "--bootstrap" -> bootstrap = value;
                case "--records" -> records = Long.parseLong(value);
                case "--keys" -> keys = Long.parseLong(value);
                case "--value-size" -> valueSize = Integer.parseInt(value);
                case "--partitions" -> partitions = Integer.parseInt(value);
                case "--threads" -> threads = Integer.parseInt(value);
                case "--guarantee" -> guarantee = value;
                case "--commit-interval-ms" -> commitIntervalMs = Integer.parseInt(value);
                default -> usage();
            }
        }
        if (bootstrap == null) {
            usage();
        }
        return new WorkloadBench.Load(args[1], bootstrap, records, keys, valueSize, partitions, threads,
                guarantee, commitIntervalMs, transactionalStores);
    }

    private static void need(String[] args, int n) {
        if (args.length != n) {
            usage();
        }
    }

    private static void usage() {
        System.err.println("usage: list | describe NAME | driver NAME INPUT OUTPUT | serve"
                + " | bench NAME --bootstrap HOST:PORT [--records N] [--partitions P] [--threads T]"
                + " | workload-bench stateless|count|windowed --bootstrap HOST:PORT [--records N] [--keys K]"
                + " [--value-size B] [--partitions P] [--threads T] [--guarantee G] [--commit-interval-ms C]"
                + " [--transactional-stores]"
                + " | count-app --bootstrap HOST:PORT --state-dir DIR --input T --output T --application-id ID"
                + " [--transactional-stores]"
                + " | soak-app --bootstrap HOST:PORT --state-dir DIR [--guarantee G]");
        System.exit(2);
    }
}
