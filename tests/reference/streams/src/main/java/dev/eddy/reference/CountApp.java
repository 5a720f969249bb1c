package dev.eddy.reference;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;

/**
 * The count by key of {@link WorkloadBench} as an application of its own, for the restart
 * benchmark ({@code tests/reference/bench-restart}): exactly-once v2, 100 ms commits, the record
 * cache at its default, RocksDB stores (transactional with {@code --transactional-stores}), static
 * membership ({@code group.instance.id} {@code <application id>-instance}).
 * Prints {@code running} when the instance is RUNNING; runs until killed or stopped.
 */
public final class CountApp {
    private CountApp() {}

    /** Runs the application until the JVM stops. */
    public static void run(String bootstrap, String stateDir, String input, String output, String applicationId,
            boolean transactionalStores) throws InterruptedException {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        // Static membership: a restart takes the killed instance's place at once.
        props.put(StreamsConfig.consumerPrefix("group.instance.id"), applicationId + "-instance");
        if (transactionalStores) {
            props.put("enable.transactional.statestores", "true");
        }
        KafkaStreams streams = new KafkaStreams(WorkloadBench.topology("count", input, output), props);
        runUntilStopped(streams);
    }

    /**
     * Starts {@code streams}, prints {@code running} when it is RUNNING and returns once it stops
     * (in error, or closed by the JVM's shutdown, which closes it cleanly).
     */
    static void runUntilStopped(KafkaStreams streams) throws InterruptedException {
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("running");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(30))));
        streams.start();
        stopped.await();
    }
}
