"""What the commands write to the terminal besides their output: a one-line progress
display for long work (:class:`Phase`: done, elapsed, ETA), and native libraries'
start-up noise kept off it.

One stream: log lines and progress both go to stderr (``Progress.message`` writes a line
that stays above the live one), so that stdout holds a command's result only (a
translation, a JSON report, training's final report) and can be redirected whole.

On a terminal the progress line is redrawn in place a few times a second; in a log file
(CI, nohup) a full line is written every ``log_seconds`` so the log stays readable.

Hand-written rather than tqdm, the field's usual bar, for that last point and the one
stream: tqdm redraws with carriage returns in a log file too (one long line of updates),
and its ``write`` for log lines above the bar would be a second way to print them.
Measured with tqdm 4.70.1: 200 updates over 2 s into a file, with one ``write`` among
them, left 25 redraws joined by carriage returns on 2 lines (1,756 bytes); at its
0.1 s minimum interval an hour of training could be one line of 36,000 redraws.
"""

from __future__ import annotations

import contextlib
import os
import re
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


class Phase:
    """One long phase of work on a :class:`Progress` line: what it does, how far it is
    (of how much, when that is known), the time elapsed and, with a total, the time left
    at the rate so far. ``finish`` leaves a line saying what was done in how long."""

    def __init__(self, progress: Progress, what: str, total: int | None = None, unit: str = ""):
        self.progress, self.what, self.total, self.unit = progress, what, total, unit
        self.started = time.monotonic()
        self.done = 0

    def advance(self, count: int = 1) -> None:
        self.reached(self.done + count)

    def reached(self, done: int) -> None:
        self.done = done
        self.progress.update(self.status())

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def status(self) -> str:
        elapsed = self.elapsed()
        of = f"/{self.total:,}" if self.total is not None else ""
        text = f"{self.what}: {self.done:,}{of}{' ' + self.unit if self.unit else ''}"
        text += f"  elapsed {format_duration(elapsed)}"
        if self.total is not None and 0 < self.done < self.total and elapsed >= 1.0:  # a rate
            text += f"  ETA {format_duration(elapsed * (self.total - self.done) / self.done)}"
        return text

    def finish(self, text: str | None = None) -> float:
        """Leave ``text`` (default: the count) with the time taken; returns the seconds."""
        seconds = self.elapsed()
        done = text or f"{self.done:,}{' ' + self.unit if self.unit else ''}"
        self.progress.message(f"{self.what}: {done} in {format_duration(seconds)}")
        return seconds


# What TensorFlow's native libraries write while ``import tensorflow`` runs, whatever
# TF_CPP_MIN_LOG_LEVEL says (they write before reading it): absl's banner, INFO and WARNING
# records (a CPU-only machine's "Could not find cuda drivers"), the CPU-feature note's
# second line, and cuDNN / cuFFT / cuBLAS factories registered twice. Nothing else is
# dropped: an ERROR or FATAL record, a C++ abort message or a Python traceback goes through.
NATIVE_NOISE = re.compile(
    rb"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    rb"|[IW]\d{4} [\d:.]+ +\d+ [^ \]]+:\d+\] .*"
    rb"|E\d{4} .*\] Unable to register cu\w+ factory.*"
    rb"|To enable the following instructions: .* rebuild TensorFlow with the appropriate "
    rb"compiler flags\."
)
# How long a command waits, once the import is done, for the filter to pass on the last
# lines (it ends as soon as its pipe closes; only a process started meanwhile and holding
# the pipe could keep it longer).
FILTER_SECONDS = 5.0


@contextlib.contextmanager
def native_stderr_filtered():
    """Keep native start-up noise (:data:`NATIVE_NOISE`) off file descriptor 2 for the
    duration; every other line still reaches it, even when the process dies on the way.

    File descriptor 2 points at a pipe read by a small separate process (this file run as
    a script), which drops the noise and copies the rest to the real stderr. It is a
    process, not a thread, because a native abort during the import (a missing CUDA
    library, an illegal instruction) kills every thread at once: what the dying process
    wrote is still in the pipe, and the filter passes it on when the pipe closes. (A
    temporary file would hold it with no one left to show it; /dev/null, as before, lost
    it.) When the filter cannot start, nothing is filtered rather than anything lost."""
    import subprocess

    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no real stderr (embedded): nothing to filter
        yield
        return
    try:
        read_end, write_end = os.pipe()
    except OSError:
        os.close(saved)
        yield
        return
    try:
        # -I -S: no site or environment to load; the script needs the standard library
        # only. Its own session, so that Ctrl-C reaches the command, not the filter.
        helper = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__)],
                                  stdin=read_end, stdout=saved, stderr=saved,
                                  start_new_session=True)
    except (OSError, ValueError):
        helper = None
    finally:
        os.close(read_end)
    if helper is None:
        os.close(write_end)
        os.close(saved)
        yield
        return
    try:
        os.dup2(write_end, 2)
        os.close(write_end)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # drops the pipe's last write end: the filter reads to its end
        os.close(saved)
        try:
            helper.wait(timeout=FILTER_SECONDS)
        except subprocess.TimeoutExpired:
            pass


def _filter_native_noise(source: int = 0, target: int = 1) -> None:
    """Copy lines from ``source`` to ``target`` until the end, less :data:`NATIVE_NOISE`."""
    pending = b""
    writable = True

    def emit(line: bytes) -> None:
        nonlocal writable
        if writable and not NATIVE_NOISE.fullmatch(line.rstrip(b"\r\n")):
            try:
                os.write(target, line)
            except OSError:  # the reader is gone; keep draining so the writer never blocks
                writable = False

    while True:
        chunk = os.read(source, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            emit(line + b"\n")
    if pending:
        emit(pending)


if __name__ == "__main__":  # the filter process of native_stderr_filtered
    _filter_native_noise()
