"""The audit's result: violations, final states and counts, assembled the same way for both engines."""

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple

from persister.state_records import StateKey

from .decode import SegmentJudgement, SegmentScan
from .rules import AuditOptions, FinalState, KeyResult, Rule

__all__ = ["Violation", "AuditResult", "AuditEnvironmentError", "assemble"]


class AuditEnvironmentError(Exception):
    """The audit cannot run here: Java, PySpark or matplotlib missing, no such directory, ... The
    message says what to install or fix; the CLI exits with status 2."""


class Violation(NamedTuple):
    """One broken invariant: the key (None for a fault of the log itself, such as a corrupt frame), the
    log offset of the record (None when there is none), the rule and a human-readable detail."""

    key: StateKey | None
    log_offset: int | None
    rule: Rule
    detail: str


@dataclasses.dataclass
class AuditResult:
    """Everything one audit found. `ok` is True when there is no violation.

    `final_states` holds every live key's replayed state (what `ShareCoordinator` recovery rebuilds);
    `key_results` the per-key details (counts, violations, the full replay dump, start-offset
    progress). `report_path` and `picture_path` are set once the outputs are written.
    """

    log_dir: str
    engine: str
    master: str | None
    options: AuditOptions
    log_start_offset: int
    log_end_offset: int
    segments: int
    records: int
    keys: int
    checkpoints: int
    deltas: int
    tombstones: int
    violations: list[Violation]
    final_states: dict[StateKey, FinalState]
    key_results: dict[StateKey, KeyResult]
    torn_tail: tuple | None
    elapsed_seconds: float = 0.0
    session_seconds: float = 0.0
    report_path: str | None = None
    picture_path: str | None = None

    @property
    def ok(self) -> bool:
        return not self.violations

    def violations_by_rule(self) -> dict[str, int]:
        counts = collections.Counter(str(v.rule) for v in self.violations)
        return {str(rule): counts[str(rule)] for rule in Rule if counts[str(rule)]}


def _key_order(key: StateKey) -> tuple:
    return (key.group_id, str(key.topic_id), key.partition)


def _order(v: Violation) -> tuple:
    return (-1 if v.log_offset is None else v.log_offset, str(v.rule), v.detail)


def assemble(
    *,
    log_dir: str,
    engine: str,
    master: str | None,
    options: AuditOptions,
    judgement: SegmentJudgement,
    scans: list[SegmentScan],
    key_results: list[KeyResult],
) -> AuditResult:
    """Combine the segment verdict and every key's result into one AuditResult."""
    violations = [Violation(None, offset, Rule(rule), detail) for offset, rule, detail in judgement.violations]
    by_key: dict[StateKey, KeyResult] = {}
    for kr in key_results:
        key = StateKey(*kr.key)
        assert key not in by_key, f"key {key} audited twice"
        by_key[key] = kr
        violations.extend(Violation(key, offset, Rule(rule), detail) for offset, rule, detail in kr.violations)
    violations.sort(key=_order)
    ordered = dict(sorted(by_key.items(), key=lambda item: _key_order(item[0])))
    return AuditResult(
        log_dir=log_dir,
        engine=engine,
        master=master,
        options=options,
        log_start_offset=judgement.log_start_offset,
        log_end_offset=judgement.log_end_offset,
        segments=len(scans),
        records=sum(kr.records for kr in key_results),
        keys=len(by_key),
        checkpoints=sum(kr.checkpoints for kr in key_results),
        deltas=sum(kr.deltas for kr in key_results),
        tombstones=sum(kr.tombstones for kr in key_results),
        violations=violations,
        final_states={key: kr.final for key, kr in ordered.items() if kr.final is not None},
        key_results=ordered,
        torn_tail=judgement.torn_tail,
    )
