"""What a demo run counted and how it ends: `DemoSummary` (the closing table and the exit code) and the
per-record `Outcome` of the demo's ledger (what each share-partition leader held at the end is a
`checks.LeaderState`).

Plain data and formatting only (the demo's edge modules fill it in).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid

from ..checks import LeaderState

__all__ = ["DemoSummary", "Outcome"]


class Outcome(enum.IntEnum):
    """Where each produced record ended, as the demo's ledger records it."""

    IN_FLIGHT = 0  # not delivery-complete (yet)
    ACCEPTED = 1
    REJECTED = 2  # archived: a consumer rejected it
    DELIVERY_LIMIT = 3  # archived: released on its last allowed delivery
    LOCK_EXPIRY = 4  # archived: its lock expired on its last allowed delivery


@dataclasses.dataclass
class DemoSummary:
    """Everything the demo counted; `lines()` renders the closing table, `exit_code` the verdict."""

    data_dir: str
    group_id: str
    topic_id: uuid.UUID
    partitions: int
    consumers: int
    seed: int
    tracker: str
    delivery_count_limit: int
    produced: int = 0
    producer_batches: int = 0
    poison_records: int = 0
    malformed_records: int = 0
    deliveries: int = 0
    redeliveries: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    lock_expired: int = 0
    released_on_leave: int = 0
    archived_delivery_limit: int = 0
    archived_lock_expiry: int = 0
    crashes: int = 0
    polls: int = 0
    acknowledgement_errors: int = 0
    fetch_errors: int = 0
    share_fetches: int = 0
    share_fetches_held: int = 0  # answered after a wait (long polling)
    share_acknowledges: int = 0
    in_flight: int = 0
    stopped_early: bool = False
    wall_seconds: float = 0.0
    simulated_seconds: float = 0.0
    durable_writes: int = 0
    group_commits: int = 0
    fsyncs: int = 0
    state_log_bytes: int = 0
    segments: int = 0
    durable_state_problems: list[str] = dataclasses.field(default_factory=list)
    leader_states: dict[int, LeaderState] = dataclasses.field(default_factory=dict)
    outcomes: dict[int, bytes] = dataclasses.field(default_factory=dict)
    poison: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    metrics_url: str | None = None
    audit: object | None = None  # sharegroup.audit.AuditResult when the audit ran
    audit_error: str | None = None

    @property
    def archived(self) -> int:
        return self.rejected + self.archived_delivery_limit + self.archived_lock_expiry

    @property
    def delivery_complete(self) -> int:
        return self.accepted + self.archived

    @property
    def throughput_records_per_s(self) -> float:
        """Deliveries (records handed to consumers, every attempt) per wall-clock second."""
        return self.deliveries / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def writes_per_fsync(self) -> float:
        return self.durable_writes / self.fsyncs if self.fsyncs else 0.0

    @property
    def exit_code(self) -> int:
        """0: all good; 1: the audit found violations, or the durable state disagrees with the leaders;
        2: the audit could not run (environment)."""
        if self.audit_error is not None:
            return 2
        if self.durable_state_problems:
            return 1
        if self.audit is not None and not getattr(self.audit, "ok", False):
            return 1
        return 0

    def lines(self) -> list[str]:
        """The closing table: a title and one row per count (label, value, what it means)."""
        n = "{:,}".format  # thousands separators
        rows: list[tuple[str, str, str]] = [
            ("records produced", n(self.produced),
             f"{n(self.producer_batches)} producer batches on {self.partitions} partitions"),
            ("deliveries", n(self.deliveries), "records handed to consumers, every attempt counted"),
            ("  accepted", n(self.accepted), ""),
            ("  released", n(self.released), "transient failures and poison records, redelivered"),
            ("  rejected", n(self.rejected), "malformed records"),
            ("  lock expired", n(self.lock_expired), f"held by consumers that crashed ({n(self.crashes)} crashes)"),
        ]
        if self.released_on_leave:
            rows.append(("  released on leave", n(self.released_on_leave), "members whose session ended"))
        rows += [
            ("redeliveries", n(self.redeliveries), "deliveries with a delivery count above 1"),
            ("archived", n(self.archived), f"delivery count limit {self.delivery_count_limit}"),
            ("  rejected", n(self.rejected), ""),
            ("  delivery limit", n(self.archived_delivery_limit),
             f"released on the last delivery ({n(self.poison_records)} poison records produced)"),
            ("  lock expiry at limit", n(self.archived_lock_expiry), "crashed on the last delivery"),
            ("in flight at the end", n(self.in_flight),
             "stopped by --duration" if self.stopped_early else "every record accepted or archived"),
            ("share requests", n(self.share_fetches + self.share_acknowledges),
             f"{n(self.share_fetches)} ShareFetch ({n(self.share_fetches_held)} long-polled), "
             f"{n(self.share_acknowledges)} ShareAcknowledge"),
            ("throughput", f"{n(round(self.throughput_records_per_s))} records/s",
             f"{self.wall_seconds:.2f} s wall, {self.simulated_seconds:.1f} s simulated"),
            ("durable writes", n(self.durable_writes),
             f"state-log records in {n(self.segments)} segments, {self.state_log_bytes / 2**20:.1f} MiB"),
            ("fsyncs", n(self.fsyncs), f"{self.writes_per_fsync:.1f} durable writes per fsync (group commit)"),
            ("durable state", "ok" if not self.durable_state_problems else "MISMATCH",
             "replayed from disk, equals every share-partition leader" if not self.durable_state_problems
             else f"{len(self.durable_state_problems)} problems"),
        ]
        label_width = max(len(label) for label, _value, _note in rows) + 2
        value_width = max(len(value) for _label, value, _note in rows)
        out = ["", "Summary"]
        out += [f"  {label:<{label_width}}{value:>{value_width}}   {note}".rstrip() for label, value, note in rows]
        out += [f"    ! {problem}" for problem in self.durable_state_problems[:10]]
        return out
