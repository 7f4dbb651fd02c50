"""The terminal's progress line, the phases shown on it, and the filter that keeps native start-up noise off it."""

import io
import os
import subprocess
import threading

import pytest

from keras_nmt.core import progress as progress_lib
from support import STARTUP_NOISE as NOISE, open_descriptors



class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_lib.time, "monotonic", lambda: now[0])
    return now


def test_on_a_terminal_the_line_is_redrawn_in_place_and_messages_stay_above_it(clock):
    terminal = Terminal()
    shown = progress_lib.Progress(terminal, log_seconds=60.0)
    assert shown.interactive and shown.interval == 0.25  # a terminal ignores log_seconds
    shown.update("reading: 1")
    clock[0] += 0.1
    shown.update("reading: 2")  # too soon: not drawn
    shown.update("reading: 3", force=True)
    shown.message("checkpoint written")  # clears the live line, then stays
    shown.message("second")  # no live line to clear
    clock[0] += 1
    shown.update("reading: 4")
    shown.close()  # the live line is ended, once
    shown.close()
    assert terminal.getvalue() == (
        "\r\x1b[2Kreading: 1" "\r\x1b[2Kreading: 3" "\r\x1b[2Kcheckpoint written\n"
        "second\n" "\r\x1b[2Kreading: 4\n"
    )


def test_in_a_log_file_whole_lines_come_every_log_seconds(clock):
    log = io.StringIO()
    shown = progress_lib.Progress(log, log_seconds=30.0)
    assert not shown.interactive
    for step in range(1, 5):
        shown.update(f"step {step}")
        clock[0] += 20  # a line at 100 s, 140 s: every other update
    shown.close()  # nothing drawn in place: nothing to end
    assert log.getvalue() == "step 1\nstep 3\n"


def test_a_disabled_progress_writes_nothing(clock):
    log = Terminal()
    shown = progress_lib.Progress(log, enabled=False)
    shown.update("step", force=True)
    shown.message("done")
    shown.close()
    assert log.getvalue() == ""


def test_a_phase_shows_its_progress_elapsed_time_and_eta(clock):
    stream = io.StringIO()
    phase = progress_lib.Phase(progress_lib.Progress(stream, log_seconds=0.0), "scanning",
                               total=400, unit="pairs")
    clock[0] += 30
    phase.advance(100)  # a quarter in 30 s: 90 s left
    clock[0] += 30
    phase.reached(400)  # done: no ETA
    assert phase.finish() == 60
    unknown = progress_lib.Phase(progress_lib.Progress(stream, log_seconds=0.0), "reading",
                                 unit="lines")
    clock[0] += 5
    unknown.advance(7)
    assert stream.getvalue().splitlines() == [
        "scanning: 100/400 pairs  elapsed 00:30  ETA 01:30",
        "scanning: 400/400 pairs  elapsed 01:00",
        "scanning: 400 pairs in 01:00",
        "reading: 7 lines  elapsed 00:05",
    ]


def _filtered(chunks: list[bytes], close_reader: bool = False) -> bytes:
    """What the noise filter passes on of ``chunks`` written to its pipe."""
    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()

    def write():  # beside the filter: more than a pipe holds would block a lone writer
        for chunk in chunks:
            os.write(source_write, chunk)
        os.close(source_write)

    writer = threading.Thread(target=write)
    if close_reader:
        os.close(target_read)
    writer.start()
    try:
        progress_lib._filter_native_noise(source_read, target_write)
    finally:
        writer.join()
        os.close(source_read)
        os.close(target_write)
    if close_reader:
        return b""
    with os.fdopen(target_read, "rb") as reader:
        return reader.read()


def test_the_filter_drops_the_noise_and_passes_everything_else_whole():
    error = b"E0000 00:00:1.5 1 cuda_platform.cc:52] failed call to cuInit\n"
    # Lines cut across writes, and a last line without its newline (a dying process).
    passed = _filtered([NOISE[:30], NOISE[30:] + b"Tra", b"ceback (most recent call last):\n",
                        error, b"Illegal instruction"])
    assert passed == b"Traceback (most recent call last):\n" + error + b"Illegal instruction"


def test_the_filter_drains_its_pipe_when_its_reader_is_gone():
    # The writer must never block on a full pipe, whoever stopped reading: the filter
    # reads to the end (here more than a pipe holds) without raising.
    assert _filtered([b"a line that cannot be shown\n" * 5000], close_reader=True) == b""


@pytest.mark.parametrize("broken", ["dup", "pipe", "popen"])
def test_without_a_filter_nothing_is_filtered_and_no_descriptor_leaks(monkeypatch, broken):
    def fail(*args, **kwargs):
        raise OSError("no more file descriptors")

    target = {"dup": (os, "dup"), "pipe": (os, "pipe"), "popen": (subprocess, "Popen")}[broken]
    monkeypatch.setattr(*target, fail)

    def stderr():
        found = os.fstat(2)
        return found.st_dev, found.st_ino

    before, stderr_before = open_descriptors(), stderr()
    ran = []
    with progress_lib.native_stderr_filtered():
        ran.append(stderr())
    assert ran == [stderr_before]  # the body ran on the real stderr
    assert stderr() == stderr_before
    assert open_descriptors() == before


def test_with_the_filter_the_noise_is_dropped_on_its_way_to_stderr(capfd):
    with progress_lib.native_stderr_filtered():
        os.write(2, NOISE + b"a real message\n")
    captured = capfd.readouterr()
    assert captured.err == "a real message\n"
