"""SIGKILL durability of the topic store: a child process appends (acks=-1, several appends in flight,
small segments so that kills also land while segments roll) and prints each acknowledged append; the
parent kills it at seeded random moments, reopens the store and checks that every acknowledged batch is
there byte for byte at its acknowledged offset, that the log opens cleanly (a torn tail is cut, never
refused) and that offsets stay dense. Run as a script, `python tests/test_topic_store_crash.py DIR
ROUND` is the child.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEGMENT_BYTES = 2048
IN_FLIGHT = 6


def batch_for(round_no: int, i: int) -> bytes:
    from tests.server_batches import produce_batch

    return produce_batch(1 + i % 4, tag=b"r%d-%d-" % (round_no, i), value_bytes=20 + i % 50)


async def child_main(data_dir: str, round_no: int) -> None:
    from sharegroup.topics.log_config import LogConfig
    from sharegroup.topics.topic_store import TopicStore

    store = await TopicStore.open(data_dir, log_config=LogConfig(segment_bytes=SEGMENT_BYTES))
    topic = store.topic_by_name("crash") or await store.create_topic("crash", 2)
    out = sys.stdout
    out.write("READY\n")
    out.flush()
    counter = iter(range(10**9))

    async def producer() -> None:
        while True:
            i = next(counter)
            partition = i % 2
            result = await store.append(topic.topic_id, partition, batch_for(round_no, i), acks=-1)
            out.write(f"ACK {partition} {result.base_offset} {i}\n")
            out.flush()

    await asyncio.gather(*(producer() for _ in range(IN_FLIGHT)))


def test_sigkill_loses_no_acknowledged_append(tmp_path):
    from sharegroup.topics.topic_store import TopicStore
    from tests.server_batches import stored_form

    rng = random.Random(1234)
    acked: dict[tuple[int, int], bytes] = {}
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    for round_no in range(6):
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(tmp_path), str(round_no)],
                                 stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
        try:
            assert child.stdout.readline() == "READY\n"
            for _ in range(rng.randint(5, 120)):
                line = child.stdout.readline()
                _, partition, base, i = line.split()
                acked[(int(partition), int(base))] = stored_form(batch_for(round_no, int(i)), int(base))
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()

        async def check() -> None:
            store = await TopicStore.open(tmp_path)
            tid = store.topic_by_name("crash").topic_id
            for partition in (0, 1):
                read = store.read(tid, partition, 0, 2**31)
                stored = {b.base_offset: bytes(b.records) for b in read.batches}
                offsets = [(b.base_offset, b.last_offset) for b in read.batches]
                assert all(prev[1] + 1 == nxt[0] for prev, nxt in zip(offsets, offsets[1:]))
                for (p, base), data in acked.items():
                    if p == partition:
                        assert stored.get(base) == data, (round_no, partition, base)
            await store.close()

        asyncio.run(check())
    assert len(acked) > 30


if __name__ == "__main__":
    sys.path.insert(0, REPO_ROOT)
    asyncio.run(child_main(sys.argv[1], int(sys.argv[2])))
