"""SCRAM credentials, kept durably under `DIR/security/scram-credentials.json`; never a password.

A credential is what RFC 5802 lets a server keep: the salt, the iteration count, the stored key
(H(HMAC(SaltedPassword, "Client Key"))) and the server key (HMAC(SaltedPassword, "Server Key")). It is
written in Kafka's text form `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`, one per
(user, mechanism). Every change rewrites the file atomically (temp file, fsync, rename, fsync of the
directory) before it is acknowledged, so a crash leaves the old or the new set, never a torn one.

Mechanisms and bounds are Kafka's: SCRAM-SHA-256 (wire id 1) and SCRAM-SHA-512 (2), 4096..16384
iterations. The salt must be at least 12 bytes (the `scramp` library's floor, which does the SCRAM
exchange); Kafka itself accepts shorter salts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MECHANISM_IDS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "MIN_SALT_BYTES",
    "ScramCredential",
    "ScramCredentialStore",
    "credential_from_password",
    "credential_from_salted_password",
    "parse_add_scram",
]

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
MIN_SALT_BYTES = 12
DEFAULT_ITERATIONS = 4096
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
FILE_NAME = "scram-credentials.json"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one mechanism (what the server needs to verify a SCRAM proof)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """The stored and server keys of a salted password (what AlterUserScramCredentials carries).

    Why not `scramp`: its public API (`ScramMechanism.make_auth_info`) derives the keys from a
    *password* only; here the client sent SaltedPassword = Hi(password, salt, i) and the password never
    reaches the broker, so there is nothing to hand to it (its key helper is private). What follows is
    RFC 5802 §3's definition, word for word, composed of the standard library's HMAC and hash:
    ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
    ServerKey = HMAC(SaltedPassword, "Server Key"). No SCRAM exchange logic is written here: proofs and
    signatures are checked by `scramp` during login, and a test checks these keys equal `scramp`'s for
    the same password and salt.
    """
    digest = _HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", digest)
    return ScramCredential(salt, stored_key, server_key, iterations)


def credential_from_password(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    """A new credential for `password` (random salt unless given), computed by `scramp`."""
    from scramp import ScramMechanism

    check_iterations(iterations)
    salt_out, stored_key, server_key, i = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt)
    return ScramCredential(salt_out, stored_key, server_key, i)


def check_iterations(iterations: int) -> None:
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Too few iterations: {iterations} (at least {MIN_ITERATIONS})")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"Too many iterations: {iterations} (at most {MAX_ITERATIONS})")


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """(user, mechanism, credential) of kafka-storage's `--add-scram` value.

    `SCRAM-SHA-256=[name=alice,password=alice-secret]`, optionally with `iterations=N`, or with
    `salt="<b64>",saltedpassword="<b64>"` instead of the password. `ValueError` says what is wrong.
    """
    mechanism, sep, rest = text.strip().partition("=")
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISM_IDS:
        raise ValueError(f"--add-scram: unknown SCRAM mechanism {mechanism!r} "
                         "(expected SCRAM-SHA-256 or SCRAM-SHA-512)")
    rest = rest.strip()
    if not sep or not (rest.startswith("[") and rest.endswith("]")):
        raise ValueError(f"--add-scram: expected MECHANISM=[name=...,password=...], got {text!r}")
    fields: dict[str, str] = {}
    for item in rest[1:-1].split(","):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--add-scram: expected key=value, got {item!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        fields[key.strip().lower()] = value
    unknown = set(fields) - {"name", "password", "iterations", "salt", "saltedpassword"}
    if unknown:
        raise ValueError(f"--add-scram: unknown field(s) {', '.join(sorted(unknown))}")
    name = fields.get("name", "")
    if not name:
        raise ValueError("--add-scram: you must supply 'name' to add-scram")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ValueError(f"--add-scram: iterations must be an integer, got {fields['iterations']!r}") from None
    check_iterations(iterations)
    try:
        salt = base64.b64decode(fields["salt"], validate=True) if "salt" in fields else None
        salted = base64.b64decode(fields["saltedpassword"], validate=True) if "saltedpassword" in fields else None
    except ValueError:
        raise ValueError("--add-scram: salt and saltedpassword must be base64") from None
    if salt is not None and len(salt) < MIN_SALT_BYTES:
        raise ValueError(f"--add-scram: the salt must be at least {MIN_SALT_BYTES} bytes")
    if salted is not None:
        if "password" in fields or salt is None:
            raise ValueError("--add-scram: give either password, or salt and saltedpassword")
        return name, mechanism, credential_from_salted_password(mechanism, salt, salted, iterations)
    if "password" not in fields:
        raise ValueError("--add-scram: you must supply 'password' (or salt and saltedpassword)")
    return name, mechanism, credential_from_password(mechanism, fields["password"], iterations, salt)


class ScramCredentialStore:
    """Every SCRAM credential of this broker, by user and mechanism, mirrored in one durable file."""

    def __init__(self, directory: Path | str | None) -> None:
        self.directory = None if directory is None else Path(directory)
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        if self.directory is not None and (self.directory / FILE_NAME).exists():
            self._load()
        self._check()

    def _load(self) -> None:
        """Read the file; one that does not parse is a `ValueError` naming it (serve refuses to start)."""
        assert self.directory is not None
        path = self.directory / FILE_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            for user, by_mechanism in data["credentials"].items():
                for mechanism, text in by_mechanism.items():
                    if mechanism in MECHANISM_IDS:
                        self._credentials.setdefault(user, {})[mechanism] = ScramCredential.from_text(text)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"cannot read the SCRAM credentials in {path}: {type(exc).__name__}: {exc}") from None

    def _check(self) -> None:
        """Every credential is for a known mechanism, within Kafka's iteration bounds, with a usable salt."""
        for user, by_mechanism in self._credentials.items():
            assert user and by_mechanism, user
            for mechanism, credential in by_mechanism.items():
                assert mechanism in MECHANISM_IDS, mechanism
                assert MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS, credential.iterations
                assert len(credential.salt) >= MIN_SALT_BYTES

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def mechanisms(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._credentials.get(user, {}))

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Apply the changes in memory and make them durable (call in a worker thread: it fsyncs)."""
        for user, mechanism in deletions:
            by_mechanism = self._credentials.get(user, {})
            by_mechanism.pop(mechanism, None)
            if not by_mechanism:
                self._credentials.pop(user, None)
        for user, mechanism, credential in upserts:
            self._credentials.setdefault(user, {})[mechanism] = credential
        self._check()
        self._write()

    def _write(self) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        data = {"version": 1, "credentials": {
            user: {m: c.to_text() for m, c in sorted(by_m.items())}
            for user, by_m in sorted(self._credentials.items())}}
        tmp = self.directory / (FILE_NAME + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / FILE_NAME)
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
