"""The `ssl.SSLContext` of an SSL or SASL_SSL listener, from Kafka's PEM configs.

Key store (`ssl.keystore.type=PEM`): the certificate chain and private key inline
(`ssl.keystore.certificate.chain` + `ssl.keystore.key`) or in one file (`ssl.keystore.location`).
`ssl.key.password` decrypts an encrypted key; `ssl.keystore.password` is refused with PEM, as Kafka
refuses it. Trust store (`ssl.truststore.type=PEM`): `ssl.truststore.certificates` inline or
`ssl.truststore.location`; it verifies client certificates. `ssl.client.auth` is none / requested /
required; on a SASL_SSL listener only the listener-prefixed value counts (SASL authenticates there).
`ssl.enabled.protocols` bounds the TLS versions (default TLSv1.2,TLSv1.3).

Inline PEM may come from a properties file whose continuation lines lost their line breaks, so PEM
blocks are re-wrapped before they are handed to OpenSSL (which reads them from a private temp file:
the `ssl` module loads a key only from a file).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import ssl
import tempfile
from typing import Any

from .listeners import Listener, listener_override, listener_value

__all__ = ["client_auth_mode", "server_context", "normalize_pem"]

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def normalize_pem(text: str, what: str) -> str:
    """The PEM blocks of `text`, each with its base64 body re-wrapped at 64 columns."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        compact = "".join(body.split())
        if ":" in body:  # legacy encrypted PEM ("Proc-Type: ...") keeps its header lines as they are
            blocks.append(f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            continue
        try:
            base64.b64decode(compact, validate=True)
        except binascii.Error:
            raise ValueError(f"{what}: invalid base64 in a PEM {label} block") from None
        lines = "\n".join(compact[i:i + 64] for i in range(0, len(compact), 64))
        blocks.append(f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n")
    if not blocks:
        raise ValueError(f"{what}: no PEM block found")
    return "".join(blocks)


def client_auth_mode(config: Any, listener: Listener) -> str:
    """none / requested / required for this listener (SASL_SSL: only the listener-prefixed value)."""
    if listener.protocol == "SASL_SSL":
        value = listener_override(config, listener.name, "ssl.client.auth")
        return value if value is not None else "none"
    return listener_value(config, listener.name, "ssl.client.auth")


def _get(config: Any, listener: Listener, key: str) -> Any:
    return listener_value(config, listener.name, key)


def server_context(config: Any, listener: Listener) -> ssl.SSLContext:
    """A server-side context for `listener`; `ValueError` names the config that is wrong."""
    keystore_type = str(_get(config, listener, "ssl.keystore.type")).upper()
    chain = _get(config, listener, "ssl.keystore.certificate.chain")
    key = _get(config, listener, "ssl.keystore.key")
    location = _get(config, listener, "ssl.keystore.location")
    key_password = _get(config, listener, "ssl.key.password")
    if key is not None and keystore_type != "PEM":
        raise ValueError(f"SSL private key can be specified only for PEM, but key store type is {keystore_type}.")
    if keystore_type != "PEM":
        raise ValueError(f"ssl.keystore.type {keystore_type} is not supported by sharegroup serve "
                         f"(listener {listener.name}): use ssl.keystore.type=PEM")
    if _get(config, listener, "ssl.keystore.password") is not None:
        raise ValueError("SSL key store password cannot be specified with PEM format, "
                         "only key password may be specified")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, str(_get(config, listener, "ssl.enabled.protocols")))
    if chain is not None or key is not None:
        if chain is None or key is None:
            raise ValueError(f"listener {listener.name}: ssl.keystore.certificate.chain and ssl.keystore.key "
                             "must be given together")
        pem = normalize_pem(str(chain), "ssl.keystore.certificate.chain") + normalize_pem(str(key), "ssl.keystore.key")
        _load_chain_from_text(context, pem, key_password)
    elif location is not None:
        try:
            pem = normalize_pem(open(location, encoding="ascii", errors="replace").read(), "ssl.keystore.location")
        except OSError as exc:
            raise ValueError(f"ssl.keystore.location: cannot read {location}: {exc.strerror or exc}") from None
        _load_chain_from_text(context, pem, key_password)
    else:
        raise ValueError(f"listener {listener.name} ({listener.protocol}) needs a key store: "
                         "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
    if _count_private_keys(pem) != 1:
        raise ValueError(f"Expected one private key, but found {_count_private_keys(pem)}")
    mode = client_auth_mode(config, listener)
    context.verify_mode = _CLIENT_AUTH[mode]
    _load_trust_store(context, config, listener)
    return context


def _count_private_keys(pem: str) -> int:
    return sum(1 for label, _body in _PEM_BLOCK.findall(pem) if label.endswith("PRIVATE KEY"))


def _set_protocols(context: ssl.SSLContext, text: str) -> None:
    versions = []
    for name in (v.strip() for v in text.split(",") if v.strip()):
        if name not in _TLS_VERSIONS:
            raise ValueError(f"ssl.enabled.protocols: unknown protocol {name!r} (expected {', '.join(_TLS_VERSIONS)})")
        versions.append(_TLS_VERSIONS[name])
    if not versions:
        raise ValueError("ssl.enabled.protocols must name at least one protocol")
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def _load_chain_from_text(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    fd, path = tempfile.mkstemp(prefix="sharegroup-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(pem)
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ValueError(f"cannot load the key store (certificate chain and private key): {exc}") from None
    finally:
        os.unlink(path)


def _load_trust_store(context: ssl.SSLContext, config: Any, listener: Listener) -> None:
    certificates = _get(config, listener, "ssl.truststore.certificates")
    location = _get(config, listener, "ssl.truststore.location")
    if certificates is None and location is None:
        if context.verify_mode != ssl.CERT_NONE:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    if str(_get(config, listener, "ssl.truststore.type")).upper() != "PEM":
        raise ValueError(f"ssl.truststore.type {_get(config, listener, 'ssl.truststore.type')} is not supported "
                         "by sharegroup serve: use ssl.truststore.type=PEM")
    if _get(config, listener, "ssl.truststore.password") is not None:
        raise ValueError("SSL trust store password cannot be specified for PEM format.")
    try:
        if certificates is not None:
            context.load_verify_locations(cadata=normalize_pem(str(certificates), "ssl.truststore.certificates"))
        else:
            context.load_verify_locations(cafile=location)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"cannot load the trust store: {exc}") from None
