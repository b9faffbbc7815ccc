"""The principal of a TLS client certificate: `User:` + its subject DN mapped by `ssl.principal.mapping.rules`.

The DN is written as Java's `X500Principal.getName()` writes it (RFC 2253): the most specific RDN first
(the reverse of the certificate's order), short attribute names (CN, OU, O, L, ST, C, STREET, DC, UID),
no space after a comma, and `,+"\\<>;` escaped with a backslash (plus a leading `#` or space and a
trailing space). An attribute without a short name is written with its dotted OID; Java would write
its DER value as `#hex`, which the `ssl` module does not expose, so such a value appears as text here.

`ssl.principal.mapping.rules` is a comma-separated list of `DEFAULT` and `RULE:<regex>/<replacement>/[L|U]`
(a comma inside the regex is allowed). The first rule whose regex matches the whole DN wins; its
replacement may use `$1`.. for groups, then `/L` lower-cases and `/U` upper-cases the result. `DEFAULT`
keeps the DN. When no rule applies, `NoMatchingRule` is raised: the connection is refused, it does not
become ANONYMOUS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["NoMatchingRule", "PrincipalMapper", "rfc2253_subject"]

_SHORT_NAMES = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "givenName": "2.5.4.42", "surname": "2.5.4.4", "dnQualifier": "2.5.4.46", "pseudonym": "2.5.4.65"}
# Java's splitter: DEFAULT, or RULE:pattern/replacement/[LU] where the pattern may hold escaped
# characters (and commas); anything else between separators is an invalid rule.
_RULE = re.compile(
    r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,\n]*?|([^,\n]*?))\s*(?:[,\n]|$)"
)
_BACKREF = re.compile(r"\$(\d)")


class NoMatchingRule(Exception):
    """No `ssl.principal.mapping.rules` rule applies to a DN (Kafka's NoMatchingRule)."""


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def rfc2253_subject(peer_cert: dict[str, Any]) -> str:
    """The RFC 2253 DN of `ssl.SSLObject.getpeercert()`'s subject (most specific RDN first)."""
    rdns = []
    for rdn in reversed(peer_cert.get("subject", ())):
        parts = []
        for name, value in rdn:
            short = _SHORT_NAMES.get(name) or _OIDS.get(name, name)
            parts.append(f"{short}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self._expand, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result

    def _expand(self, match: re.Match[str]) -> str:
        groups = match.re.groups

        def one(ref: re.Match[str]) -> str:
            index = int(ref.group(1))
            return ref.group(0) if index > groups else (match.group(index) or "")  # out of range: literal

        return _BACKREF.sub(one, self.replacement)


class PrincipalMapper:
    """`ssl.principal.mapping.rules`, parsed once; `name(dn)` maps one DN."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules_text = rules
        self.rules: list[_Rule] = []
        position = 0
        text = rules.strip()
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule: {text[position:]!r}")
            default, pattern, replacement, case, other = match.groups()
            if other:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule: {other!r}")
            if default:
                self.rules.append(_Rule(None))
            elif pattern is not None:
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"ssl.principal.mapping.rules: invalid regex {pattern!r}: {exc}") from None
                self.rules.append(_Rule(compiled, replacement, case))
            position = match.end()
        if not self.rules:
            self.rules.append(_Rule(None))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules_text}")
