"""The live demo with `--share-state kafka://...`: serve keeps its share state in a topic of a 3-broker
librdkafka mock cluster (tests/kafka_mock.py), and the demo's durable-state check and audit read a
copy of that topic (`DIR/share-state-copy`) instead of `DIR/share-state`, which serve never writes."""

from __future__ import annotations

import os

import pytest

from sharegroup.cli import EXIT_USAGE, main


@pytest.mark.parametrize("argv, message", [
    (["--simulated", "--share-state", "kafka://127.0.0.1:9092"], "not with --simulated"),
    (["--share-state", "http://127.0.0.1:9092"], "not a kafka:// URL"),
    (["--share-state", "kafka://nohost"], "not host:port"),
])
def test_demo_refuses_share_state_with_simulated_or_a_bad_url(tmp_path, capsys, argv, message):
    data = tmp_path / "data"
    assert main(["demo", "--data", str(data), "--no-audit", *argv]) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not data.exists()  # refused before anything ran


def test_live_demo_with_share_state_on_kafka_checks_and_audits_the_topic(tmp_path):
    pytest.importorskip("confluent_kafka")
    try:
        from .kafka_mock import MockCluster

        cluster = MockCluster(3)
    except (OSError, RuntimeError, AttributeError) as exc:
        pytest.skip(f"librdkafka's mock cluster cannot be created here: {exc}")
    from persister.state_log import segment_file_name
    from sharegroup.demo.live.demo import LiveRates, run_live_demo
    from sharegroup.demo.live.ledger import LiveOutcome

    try:
        cluster.create_topic("demo-share-state", partitions=1, replication_factor=3)
        url = f"kafka://{cluster.bootstrap_servers}/demo-share-state"
        lines: list[str] = []
        data = tmp_path / "data"
        summary = run_live_demo(data_dir=data, partitions=2, consumers=2, records=500, duration_s=60,
                                delivery_count_limit=3, rates=LiveRates(flaky=0.05, malformed=0.02, poison=0.01),
                                kill_at_batch=0, audit=True, audit_engine="python", audit_out_dir=tmp_path / "audit",
                                share_state=url, print_fn=lines.append, progress=False)
    finally:
        cluster.close()
    assert summary.ledger.problems == [] and summary.consumer_errors == []
    assert summary.durable_state_problems == [] and summary.outcome_problems == []
    assert summary.ledger.produced_count == 500 and sum(summary.log_end_offsets.values()) == 500
    assert summary.ledger.outcomes[LiveOutcome.IN_FLIGHT] == 0
    # serve wrote no local share state; the checks read the copy of the topic, one segment from offset 0
    assert not (data / "share-state").exists()
    assert [n for n in os.listdir(data / "share-state-copy") if n.endswith(".log")] == [segment_file_name(0)]
    assert summary.audit is not None and summary.audit.ok and summary.audit.records > 0
    assert summary.exit_code == 0
    assert any(line.startswith("share state: ") and url in line for line in lines)
    assert any("share state from " + url in line for line in lines)
