"""The one switch between each native (Cython) module and its pure-Python twin (layer 0).

`SHAREGROUP_PUREPYTHON=1` selects the pure twins for the whole process; otherwise every compiled module
is required, and a missing build is an `ImportError` naming the module and how to build it, never a
silent fallback. The native modules are `sharegroup.tracker._native`, `persister._native_records` and
`sharegroup.topics._record_scan`; setup.py builds each into the package that owns it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["NATIVE", "native_module", "twin"]

NATIVE: bool = os.environ.get("SHAREGROUP_PUREPYTHON") != "1"


def native_module(name: str) -> ModuleType:
    """The compiled module `name`; raises ImportError with a clear message when it is not built."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"the native module {name} is not built: run `make build` (or `python setup.py build_ext "
            f"--inplace`), or set SHAREGROUP_PUREPYTHON=1 to use its pure-Python twin ({exc})"
        ) from exc


def twin(native: str, pure: str) -> ModuleType:
    """The module this process uses: the compiled `native` unless SHAREGROUP_PUREPYTHON=1 selects `pure`."""
    return native_module(native) if NATIVE else importlib.import_module(pure)
