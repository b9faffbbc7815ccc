"""The demos' data directory: made ready for a run, and wiped only where a demo wrote before.

A directory a demo created or wiped holds the marker file `DATA_DIR_MARKER`; only such a directory is
ever wiped, and then only what a demo writes there (the simulated demo's state log, what the live
demo's `sharegroup serve` keeps), never while another process holds its state log open.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from .errors import DemoError

__all__ = ["DATA_DIR_MARKER", "prepare_data_dir", "prepare_serve_data_dir"]

DATA_DIR_MARKER = ".sharegroup-demo"  # written into a data directory the demo created or wiped


def prepare_data_dir(data_dir: str, keep: bool) -> str:
    """Make `data_dir` ready; returns "new", "fresh" (an earlier demo's log wiped) or "kept".

    Only the state log's own files (segments, start offset) are ever deleted, and only in a directory
    that the demo created before (it holds the marker file): never someone else's log. Without `keep`,
    any other non-empty directory is refused too, so a mistyped --data does not fill a directory with
    segment files.
    """
    from persister.state_log import START_OFFSET_FILE, segment_file_name

    if not os.path.exists(data_dir):
        os.makedirs(data_dir)
        _write_marker(data_dir)
        return "new"
    if not os.path.isdir(data_dir):
        raise DemoError(f"--data {data_dir} is not a directory")
    names = os.listdir(data_dir)
    segment_len = len(segment_file_name(0))
    state_files = [name for name in names if (name.endswith(".log") and len(name) == segment_len
                                              and name[:-4].isdigit()) or name == START_OFFSET_FILE]
    if keep:
        return "kept"
    if state_files and DATA_DIR_MARKER not in names:
        raise DemoError(f"{data_dir} holds a state log that the demo did not create; pass --keep to add to it, "
                        "or choose another --data directory")
    if names and DATA_DIR_MARKER not in names:
        raise DemoError(f"{data_dir} is not empty and was not created by the demo; choose another --data directory "
                        "(or pass --keep to write the state log there anyway)")
    with _state_log_lock(data_dir):
        for name in state_files:
            os.unlink(os.path.join(data_dir, name))
    _write_marker(data_dir)
    return "fresh" if state_files else "new"


# what `sharegroup serve` keeps in its data directory, and the live demo's copy of a Kafka state topic
SERVE_SUBDIRS = ("topics", "share-state", "groups", "share-state-copy")
SERVE_FILES = ("meta.properties", "serve.log")  # serve's cluster id; the live demo's copy of serve's stderr


def prepare_serve_data_dir(data_dir: str, keep: bool) -> str:
    """Make `data_dir` ready for the live demo's `sharegroup serve`; returns "new", "fresh" or "kept".

    The same rules as for the simulated demo's state log: only a directory the demo created (it holds
    the marker file) is ever wiped, and then only what serve keeps there (its topic logs, share state,
    group records and cluster id), the demo's serve log and the files of an earlier simulated run; never
    while a broker holds its state log open. Without `keep`, any other non-empty directory is refused.
    """
    import shutil

    if os.path.isdir(data_dir) and not keep and DATA_DIR_MARKER in os.listdir(data_dir):
        wiped = False
        with _state_log_lock(os.path.join(data_dir, "share-state")):
            for name in SERVE_SUBDIRS:
                path = os.path.join(data_dir, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                    wiped = True
            for name in SERVE_FILES:
                path = os.path.join(data_dir, name)
                if os.path.isfile(path):
                    os.unlink(path)
        how = prepare_data_dir(data_dir, keep)  # also an earlier simulated run's state log files
        return "fresh" if wiped or how == "fresh" else how
    return prepare_data_dir(data_dir, keep)


@contextlib.contextmanager
def _state_log_lock(data_dir: str) -> Iterator[None]:
    """Hold the state log's directory lock (the flock a `SegmentLog` holds while it has the directory
    open), so that a log another process has open is never wiped under it.

    Takes the persister's own lock (`lock_log_dir`) without creating a lock file where there is none
    (then no log was ever opened there).
    """
    from persister.state_log_files import LogLockedError, lock_log_dir

    try:
        fd = lock_log_dir(data_dir, create=False)
    except LogLockedError:
        raise DemoError(f"the state log in {data_dir} is open in another process") from None
    try:
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def _write_marker(data_dir: str) -> None:
    with open(os.path.join(data_dir, DATA_DIR_MARKER), "w") as f:
        f.write("This state log was written by `sharegroup demo`; the next demo run wipes it (unless --keep).\n")
