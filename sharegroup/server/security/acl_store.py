"""The durable ACLs of a broker: one JSON file, `DIR/security/acls.json`, replaced atomically.

Every change rewrites the whole file (written to a temporary file, fsync'd, renamed over the old one,
the directory fsync'd), so a crash leaves the old or the new set of ACLs, never a mix. The file is
read once at start; a file that is not valid JSON of this shape, or that holds an ACL CreateAcls would
refuse, stops the start with `AclFileError` naming the file (never a silent loss of ACLs).

    {"version": 1, "acls": [{"resource_type": "TOPIC", "name": "orders", "pattern_type": "LITERAL",
                             "principal": "User:alice", "host": "*", "operation": "READ",
                             "permission": "ALLOW"}, ...]}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterable

from ...topics.segment_files import write_file_atomically
from .acls import AclBinding

__all__ = ["AclFileError", "AclStore", "FILE_NAME", "SECURITY_DIR"]

SECURITY_DIR = "security"
FILE_NAME = "acls.json"
VERSION = 1


class AclFileError(ValueError):
    """The ACL file cannot be read as ACLs: the broker refuses to start rather than lose them."""


class AclStore:
    """Reads and replaces the ACL file of one data directory."""

    def __init__(self, data_dir: Path | str, fsync: Callable[[int], None] | None = os.fsync) -> None:
        self.directory = os.path.join(str(data_dir), SECURITY_DIR)
        self.path = os.path.join(self.directory, FILE_NAME)
        self._fsync = fsync

    def load(self) -> list[AclBinding]:
        """The stored ACLs (none when there is no file yet); `AclFileError` when the file is bad."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AclFileError(f"{self.path}: not a JSON ACL file: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("acls"), list):
            raise AclFileError(f"{self.path}: not an ACL file of version {VERSION}")
        try:
            return sorted({AclBinding.from_json(item) for item in doc["acls"]})
        except ValueError as exc:
            raise AclFileError(f"{self.path}: {exc}") from None

    def save(self, acls: Iterable[AclBinding]) -> None:
        """Replace the file with exactly these ACLs (durable when this returns)."""
        os.makedirs(self.directory, exist_ok=True)
        doc = {"version": VERSION, "acls": [b.to_json() for b in sorted(acls)]}
        write_file_atomically(self.path, json.dumps(doc, indent=1).encode() + b"\n", self._fsync)
