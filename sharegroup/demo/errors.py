"""`DemoError`: a demo cannot run as asked."""

__all__ = ["DemoError"]


class DemoError(Exception):
    """The demo cannot run as asked (a data directory it must not touch, a port in use, ...)."""
