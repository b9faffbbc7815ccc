"""`sharegroup configs --entity-type users`: SCRAM credentials, as kafka-configs.sh manages them.

    --alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    --alter --entity-name alice --delete-config 'SCRAM-SHA-512'
    --describe [--entity-name alice]

The password never leaves this process: the tool draws a random salt and sends the salted password
(PBKDF2 of the password, as SCRAM defines it) in AlterUserScramCredentials; the broker keeps only the
derived keys. Iterations default to 4096 (absent or -1) and must lie in 4096..16384. A broker refuses
two changes for one user in one request, so each mechanism goes in a request of its own.
`--describe` prints "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192".
"""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets
from typing import TextIO

from .wire_client import AdminError, WireAdmin

__all__ = ["run_users"]

DESCRIBE_USER_SCRAM, ALTER_USER_SCRAM = 50, 51
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_VALUE = re.compile(r"^(?:iterations=(-?[0-9]*),)?password=(.*)$")
_ENTRY = re.compile(r"(SCRAM-SHA-(?:256|512))=\[([^\]]*)\]")
SALT_BYTES = 32


def _upsertions(name: str, text: str) -> list[dict]:
    out = []
    rest = _ENTRY.sub("", text).replace(",", "").strip()
    if rest:
        raise ValueError(f"--add-config for users takes SCRAM-SHA-256=[...] / SCRAM-SHA-512=[...], got {text!r}")
    for mechanism, value in _ENTRY.findall(text):
        match = _VALUE.match(value)
        if match is None:
            raise ValueError(f"invalid SCRAM config {mechanism}=[{value}]: expected [iterations=N,]password=P")
        iterations = int(match.group(1)) if match.group(1) not in (None, "", "-1") else 4096
        if iterations < 4096:
            raise ValueError(f"the iterations of {mechanism} must be at least 4096, got {iterations}")
        mechanism_id, digest = MECHANISMS[mechanism]
        salt = secrets.token_bytes(SALT_BYTES)
        # SaltedPassword = Hi(password, salt, i), which RFC 5802 defines as PBKDF2 with HMAC-H: the
        # standard library's PBKDF2 is that function (scramp has no public call that returns it).
        salted = hashlib.pbkdf2_hmac(digest, match.group(2).encode(), salt, iterations)
        out.append({"name": name, "mechanism": mechanism_id, "iterations": iterations, "salt": salt,
                    "salted_password": salted})
    return out


def run_users(args: argparse.Namespace, admin: WireAdmin, out: TextIO) -> int:
    connection = admin.bootstrap
    assert connection is not None
    if args.describe:
        users = [{"name": args.entity_name}] if args.entity_name else None
        _v, response = connection.send(DESCRIBE_USER_SCRAM, {"users": users})
        if int(response.error_code) != 0:
            raise AdminError(response.error_message or f"error code {int(response.error_code)}")
        for result in response.results:
            if int(result.error_code) != 0:
                raise AdminError(result.error_message or f"error code {int(result.error_code)}")
            infos = ", ".join(f"{NAMES.get(int(i.mechanism), int(i.mechanism))}=iterations={int(i.iterations)}"
                              for i in result.credential_infos)
            print(f"SCRAM credential configs for user-principal '{result.user}' are {infos}", file=out)
        return 0
    if not args.entity_name:
        raise ValueError("--entity-name is required with --alter")
    upsertions = _upsertions(args.entity_name, args.add_config or "")
    deletions = []
    for item in (args.delete_config or "").split(","):
        mechanism = item.strip()
        if not mechanism:
            continue
        if mechanism not in MECHANISMS:
            raise ValueError(f"--delete-config for users takes SCRAM-SHA-256 or SCRAM-SHA-512, got {mechanism!r}")
        deletions.append({"name": args.entity_name, "mechanism": MECHANISMS[mechanism][0]})
    if not upsertions and not deletions:
        raise ValueError("--alter needs --add-config or --delete-config")
    for change in [{"deletions": [d], "upsertions": []} for d in deletions] + \
                  [{"deletions": [], "upsertions": [u]} for u in upsertions]:
        _v, response = connection.send(ALTER_USER_SCRAM, change)
        for result in response.results:
            if int(result.error_code) != 0:
                raise AdminError(result.error_message or f"error code {int(result.error_code)}")
    print(f"Completed updating config for user {args.entity_name}.", file=out)
    return 0
