"""`ProgressBar`: one line of progress on a stream, redrawn in place on a terminal.

The demo's edge: it draws while a run goes on and never touches the run's state.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Callable, TextIO

__all__ = ["ProgressBar"]

BAR_WIDTH = 20


class ProgressBar:
    """A one-line bar redrawn with \\r on a terminal (10 times a second at most); on anything else, a
    plain line every two seconds, so a log file holds a readable history."""

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self._total = max(1, total)
        self._stream = stream
        self._is_terminal = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._interval_s = 0.1 if self._is_terminal else 2.0
        self._next_draw_s = 0.0
        self._drawn = False

    def update(self, done: int, text: Callable[[], str], *, force: bool = False) -> None:
        """Redraw when due (or `force`); `text` builds the rest of the line only then."""
        if self._stream is None:
            return
        now_s = time.monotonic()
        if not force and now_s < self._next_draw_s:
            return
        self._next_draw_s = now_s + self._interval_s
        fraction = min(1.0, done / self._total)
        bar = "#" * int(fraction * BAR_WIDTH)
        line = f"[{bar:<{BAR_WIDTH}}] {fraction:4.0%}  {text()}"
        sys.stdout.flush()  # keep the bar after whatever was printed before it
        if self._is_terminal:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self._stream.write("\r" + line[:width].ljust(width))
            self._drawn = True
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        """End the bar's line on a terminal."""
        if self._stream is not None and self._is_terminal and self._drawn:
            self._stream.write("\n")
            self._stream.flush()
