"""The message the operator's tools print for a Kafka error code the broker sent without a message."""

from __future__ import annotations

from ..errors import Errors

__all__ = ["error_text"]

_TEXT = {
    Errors.GROUP_ID_NOT_FOUND: "Group {group} not found.",
    Errors.GROUP_NOT_EMPTY: "Group {group} is not empty.",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    Errors.INVALID_CONFIG: "Invalid config value.",
    Errors.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
}


def error_text(code: int, group: str = "") -> str:
    """Kafka's sentence for `code` where we know it, else the error's name and code."""
    try:
        error = Errors(code)
    except ValueError:
        return f"error code {code}"
    text = _TEXT.get(error)
    return text.format(group=group) if text else f"{error.name} (error code {code})"
