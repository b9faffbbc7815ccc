"""`LiveSummary`: what a live demo run counted and how it ends (the closing table and the exit code).

Plain data and formatting only; `live.demo` fills it in from the `LiveLedger` and its own checks.
"""

from __future__ import annotations

import dataclasses

from ...types import AcknowledgeType
from .ledger import LiveLedger, LiveOutcome
from .workload import RecordKind

__all__ = ["LiveSummary"]


@dataclasses.dataclass
class LiveSummary:
    data_dir: str
    topic: str
    group_id: str
    partitions: int
    consumers: int
    seed: int
    delivery_count_limit: int
    ledger: LiveLedger
    bootstrap: str = ""
    produce_seconds: float = 0.0
    wall_seconds: float = 0.0  # first produce to the last record accepted or archived
    killed_consumer: int | None = None
    killed_acked: int = 0
    killed_held: int = 0
    consumer_errors: list[str] = dataclasses.field(default_factory=list)
    log_end_offsets: dict[int, int] = dataclasses.field(default_factory=dict)
    serve_exit_code: int | None = None
    durable_state_problems: list[str] = dataclasses.field(default_factory=list)
    outcome_problems: list[str] = dataclasses.field(default_factory=list)
    stopped_early: bool = False
    metrics_url: str | None = None
    audit: object | None = None  # sharegroup.audit.AuditResult when the audit ran
    audit_error: str | None = None
    share_state_source: str = "disk"  # where the durable share state was read from (a kafka:// URL)

    @property
    def produced(self) -> int:
        return self.ledger.produced_count

    @property
    def records_per_s(self) -> float:
        """Records produced and then accepted or archived, per second of the whole run (end to end)."""
        return self.ledger.done / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        """The run itself (before the audit): every record accounted for, the broker and the state agree."""
        return (self.ledger.problem_count == 0 and not self.durable_state_problems and not self.consumer_errors
                and self.serve_exit_code == 0 and not self.stopped_early)

    @property
    def exit_code(self) -> int:
        """0 all good; 1 a check failed (outcome, durable state, broker exit, audit violations); 2 the
        audit could not run."""
        if self.audit_error is not None:
            return 2
        if not self.ok:
            return 1
        if self.audit is not None and not getattr(self.audit, "ok", False):
            return 1
        return 0

    def lines(self) -> list[str]:
        n = "{:,}".format
        ledger = self.ledger
        out = ledger.outcomes
        kinds = ledger.kinds
        archived = sum(out[o] for o in (LiveOutcome.REJECTED, LiveOutcome.DELIVERY_LIMIT,
                                        LiveOutcome.KILLED_AT_LIMIT, LiveOutcome.LOCK_EXPIRY_AT_LIMIT))
        if self.killed_consumer is None:
            kill = "no consumer was killed"
        else:
            redelivered = sum(1 for p, o, count in ledger.held if ledger.outcome_of(p, o)[1] > count)
            kill = (f"consumer {self.killed_consumer} SIGKILLed mid-batch after acknowledging "
                    f"{n(self.killed_acked)}; its connection closed, {n(redelivered)} redelivered to the others")
        ends = sum(self.log_end_offsets.values())
        rows: list[tuple[str, str, str]] = [
            ("records produced", n(self.produced),
             f"acks=all, idempotent, {self.partitions} partitions: {n(kinds[RecordKind.FLAKY])} flaky, "
             f"{n(kinds[RecordKind.MALFORMED])} malformed, {n(kinds[RecordKind.POISON])} poison"),
            ("deliveries", n(ledger.deliveries), f"records handed to {self.consumers} ShareConsumers, every attempt"),
            ("  accepted", n(ledger.acks[AcknowledgeType.ACCEPT]), ""),
            ("  released", n(ledger.acks[AcknowledgeType.RELEASE]), "transient failures and poison records"),
            ("  rejected", n(ledger.acks[AcknowledgeType.REJECT]), "malformed records"),
            ("  held when killed", n(ledger.held_at_kill), kill),
        ]
        if ledger.ack_failures:
            rows.append(("  ack refused", n(ledger.ack_failures), "the lock had expired: redelivered"))
        if ledger.unseen_deliveries:
            rows.append(("  never handed out", n(ledger.unseen_deliveries),
                         "acquired by the killed consumer's client before it died"))
        rows += [
            ("redeliveries", n(ledger.redeliveries), "deliveries with a delivery count above 1"),
            ("accepted", n(out[LiveOutcome.ACCEPTED]), ""),
            ("archived", n(archived), f"delivery count limit {self.delivery_count_limit}"),
            ("  rejected", n(out[LiveOutcome.REJECTED]), ""),
            ("  delivery limit", n(out[LiveOutcome.DELIVERY_LIMIT] + out[LiveOutcome.KILLED_AT_LIMIT]),
             f"released on the last delivery (poison records)"),
        ]
        if out[LiveOutcome.LOCK_EXPIRY_AT_LIMIT]:
            rows.append(("  lock expiry at limit", n(out[LiveOutcome.LOCK_EXPIRY_AT_LIMIT]), ""))
        rows += [
            ("in flight at the end", n(out[LiveOutcome.IN_FLIGHT]),
             "stopped by --duration" if self.stopped_early else "every record accepted or archived"),
            ("throughput", f"{n(round(self.records_per_s))} records/s",
             f"end to end: {self.wall_seconds:.2f} s from the first produce to the last acknowledgement"),
            ("outcome", "ok" if ledger.problem_count == 0 else "WRONG",
             "every record ended as the consumers' acknowledgements imply, byte-exact" if ledger.problem_count == 0
             else f"{n(ledger.problem_count)} problems"),
            ("durable state", "ok" if not self.durable_state_problems else "MISMATCH",
             f"topic logs end at {n(ends)}; share state from {self.share_state_source}: every partition complete to "
             "its log end"
             if not self.durable_state_problems else f"{len(self.durable_state_problems)} problems"),
            ("broker", "ok" if self.serve_exit_code == 0 else f"exit {self.serve_exit_code}",
             f"sharegroup serve on {self.bootstrap}, stopped with SIGTERM"),
        ]
        label_width = max(len(label) for label, _value, _note in rows) + 2
        value_width = max(len(value) for _label, value, _note in rows)
        lines = ["", "Summary"]
        lines += [f"  {label:<{label_width}}{value:>{value_width}}   {note}".rstrip() for label, value, note in rows]
        lines += [f"    ! {problem}" for problem in
                  (ledger.problems + self.durable_state_problems + self.consumer_errors)[:20]]
        return lines

