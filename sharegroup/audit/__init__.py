"""The Spark audit of a share-coordinator state log (layer 4).

`run_audit(dir)` decodes every segment file with Spark, replays each share-partition's checkpoint/delta
stream in log order exactly as `persister.ShareCoordinator` recovers it, checks the invariants (see
`Rule`), prints a summary table and writes report.json and audit.png. `replay_log(dir)` is the same audit
in one Python process (no Spark). `main(argv)` is `sharegroup audit`.

Module map: rules.py (the invariants and the per-key replay, shared by both engines), decode.py
(segment files to rows; framing judged as recovery does), tasks.py (what Spark executors run),
spark_job.py (the job and the tuned session), single_process.py (one process, no Spark), runner.py
(run_audit: picks the engine, writes the outputs), result.py, report.py, cli.py.
Nothing here imports pyspark at import time; the core never imports this package.
"""

from .cli import main
from .result import AuditEnvironmentError, AuditResult, Violation
from .rules import AuditOptions, FinalState, KeyResult, Rule
from .runner import run_audit
from .single_process import replay_log

__all__ = [
    "AuditEnvironmentError",
    "AuditOptions",
    "AuditResult",
    "FinalState",
    "KeyResult",
    "Rule",
    "Violation",
    "main",
    "replay_log",
    "run_audit",
]
