"""A segment cut short or corrupted on disk: eddy's broker starts, serves every record of
the batches before the damage, and takes new writes right after them."""

import struct
from pathlib import Path

from brokers import Broker
from clients import create_topic, kcat

SEGMENT = "00000000000000000000.log"


def batches(segment: bytes):
    """(start, end, record count) of each batch in a segment."""
    out, at = [], 0
    while at + 61 <= len(segment):
        length = struct.unpack(">i", segment[at + 8:at + 12])[0]
        count = struct.unpack(">i", segment[at + 57:at + 61])[0]
        out.append((at, at + 12 + length, count))
        at += 12 + length
    assert at == len(segment)
    return out


def test_a_damaged_tail_is_cut_and_the_log_goes_on():
    broker = Broker("eddy").start()
    try:
        create_topic(broker.bootstrap, "torn", 1)
        lines = [f"record-{i:04d}" for i in range(300)]
        kcat(broker.bootstrap, "-P", "-t", "torn", "-p", "0", "-X", "acks=all", "-X", "max.in.flight=1",
             "-X", "batch.num.messages=7", "-X", "linger.ms=0", stdin="\n".join(lines) + "\n")
        assert broker.stop() == 0
        log = Path(broker.data_dir) / "torn-0" / SEGMENT
        pristine = log.read_bytes()
        spans = batches(pristine)
        assert len(spans) > 10, "the test needs many batches"

        # Damage points: inside the last batches, on their boundaries, and a few earlier.
        points = sorted({spans[-1][0] + 5, spans[-1][0], spans[-1][1] - 1, spans[-2][0] + 30,
                         spans[-3][0] + 61, spans[-3][0] + 9, spans[len(spans) // 2][0] + 70,
                         spans[2][0] + 100, 10})
        for cut in points:
            for corrupt in (False, True):
                damaged = bytearray(pristine)
                if corrupt:
                    damaged[cut] ^= 0xA5
                else:
                    del damaged[cut:]
                log.write_bytes(bytes(damaged))
                for stale in log.parent.glob("*index"):
                    stale.unlink()
                broker.start()
                # Batches wholly before the damage survive. (Bytes 12..16 of a batch, the
                # partition leader epoch, are outside the CRC, as in Kafka: not damaged here.)
                intact = [s for s in spans if s[1] <= cut]
                survivors = sum(count for _, _, count in intact)
                out = kcat(broker.bootstrap, "-C", "-t", "torn", "-p", "0", "-o", "beginning", "-e", "-q")
                assert out.splitlines() == lines[:survivors], f"damage at {cut}, corrupt={corrupt}"
                kcat(broker.bootstrap, "-P", "-t", "torn", "-p", "0", "-X", "acks=all", stdin="after\n")
                out = kcat(broker.bootstrap, "-C", "-t", "torn", "-p", "0", "-o", "beginning", "-e", "-q",
                           "-f", "%o %s\n")
                assert out.splitlines()[-1] == f"{survivors} after", f"damage at {cut}, corrupt={corrupt}"
                assert broker.stop() == 0
    finally:
        broker.close()
