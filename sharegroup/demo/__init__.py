"""The demos behind `sharegroup demo`, which show the engine at work and check what it did: with real
Kafka clients against a real `sharegroup serve` (`live/`, the default), as an in-process simulation on
simulated time (`simulated/`, `--simulated`), or as KIP-932's worked example narrated step by step
(`walkthrough`, `--walkthrough`).

What the demos share: `data_dir` (where a demo may write and wipe), `checks` (the durable state and
the audit at the end of a run), `errors`, `hashing` (the workloads' seeded decisions), `progress_bar`.

Layer 4 (an edge). What the command line calls is loaded on first use, so importing one module of a
demo (a live consumer's child process imports `live.consumer`) loads none of the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import DemoError
    from .live.demo import run_live_demo
    from .simulated.demo import run_demo
    from .walkthrough import run_walkthrough

__all__ = ["DemoError", "run_demo", "run_live_demo", "run_walkthrough"]

_MODULE_OF = {
    "DemoError": ".errors",
    "run_demo": ".simulated.demo",
    "run_live_demo": ".live.demo",
    "run_walkthrough": ".walkthrough",
}


def __getattr__(name: str):
    if name in _MODULE_OF:
        return getattr(importlib.import_module(_MODULE_OF[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
