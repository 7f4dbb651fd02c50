"""What the commands write to the terminal besides their output: a one-line progress
display for long work, and native libraries' start-up noise kept off it.

On a terminal the progress line is redrawn in place a few times a second; in a log file
(CI, nohup) a full line is written every ``log_seconds`` so the log stays readable.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    def __init__(self, stream: TextIO | None = None, log_seconds: float = 30.0, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = 0.25 if self.interactive else log_seconds
        self.enabled = enabled
        self._last = 0.0
        self._drawn = False

    def update(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        if self.interactive:
            self.stream.write("\r\x1b[2K" + text)
            self._drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A line that stays (an evaluation result, a checkpoint), above the live line."""
        if not self.enabled:
            return
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


@contextlib.contextmanager
def native_stderr_muted():
    """Send file descriptor 2 to /dev/null for the duration (Python exceptions still
    propagate; they are printed after it is restored)."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no real stderr (embedded): nothing to mute
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
