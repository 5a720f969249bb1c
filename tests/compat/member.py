"""A consumer-group member as a process of its own, so tests can kill it with SIGKILL.

    python member.py BOOTSTRAP GROUP TOPIC LOG [SECONDS_OF_WORK_PER_RECORD]

It processes each record by appending `TIME processed PARTITION OFFSET` to LOG, then commits
the record's offset synchronously and appends `TIME committed PARTITION OFFSET`: a record is
committed only after it was processed. A commit refused during a rebalance is logged as
`commit-failed` and the member goes on, as an application would."""

import sys
import time

from confluent_kafka import Consumer, KafkaException

bootstrap, group, topic, log_path = sys.argv[1:5]
work = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
})
consumer.subscribe([topic])
with open(log_path, "a", buffering=1) as log:
    while True:
        m = consumer.poll(0.2)
        if m is None or m.error() is not None:
            continue
        time.sleep(work)
        log.write(f"{time.time():.6f} processed {m.partition()} {m.offset()}\n")
        try:
            consumer.commit(message=m, asynchronous=False)
            log.write(f"{time.time():.6f} committed {m.partition()} {m.offset()}\n")
        except KafkaException as e:
            log.write(f"{time.time():.6f} commit-failed {m.partition()} {m.offset()} {e.args[0].name()}\n")
