"""Test hook: make a run fail at a named point, to test crash safety and resume. Not for users.

Tests set ``KERAS_NMT_TEST_HOOK=POINT[@STEP][:ACTION]``; when the trainer reaches POINT (at
update STEP, or the first time) the ACTION happens: ``kill`` (default, ``SIGKILL`` to itself:
nothing cleans up) or ``nospace`` (``RLIMIT_FSIZE`` = 0: every write that grows a file fails).
Points, in order: ``step`` (after an update, before its writes); ``checkpoint-start``;
``checkpoint-writing`` (a thread kills the process once ``ckpt-N_temp`` appears, or at
``checkpoint-data-written`` if the write outruns it: :func:`watch_writing`);
``checkpoint-data-written`` (data complete, the ``checkpoint`` state file not yet naming
it); ``checkpoint-state-written``; ``evaluation`` (before the best weights are saved);
``best-data-written`` (best weights written, their state file not yet); ``write:NAME``
(inside :func:`keras_nmt.core.atomic.open_atomic` for NAME, before the rename).

Cost: one ``os.environ`` lookup per point.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import threading

HOOK_ENV = "KERAS_NMT_TEST_HOOK"
ACTIONS = ("kill", "nospace")
WATCH_SECONDS = 0.0002


def _armed() -> tuple[str, int | None, str] | None:
    spec = os.environ.get(HOOK_ENV)
    if not spec:
        return None
    action = "kill"
    head, sep, tail = spec.rpartition(":")
    if sep and tail in ACTIONS:
        spec, action = head, tail
    name, _, step = spec.partition("@")
    return name, (int(step) if step else None), action


def _fire(action: str) -> None:
    if action == "nospace":
        import resource  # Unix only: imported when a test arms this action, not at load

        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
        os.environ.pop(HOOK_ENV, None)  # fire once
        return
    os.kill(os.getpid(), signal.SIGKILL)


def point(name: str, step: int | None = None) -> None:
    """The run has reached point ``name`` (at update ``step``): fail there if armed."""
    armed = _armed()
    if armed is None:
        return
    armed_name, armed_step, action = armed
    if armed_name == name and (armed_step is None or armed_step == step):
        _fire(action)


@contextlib.contextmanager
def watch_writing(directory: pathlib.Path, step: int):
    """Armed for ``checkpoint-writing`` at ``step``: kill the process as soon as a
    temporary checkpoint directory appears in ``directory``."""
    armed = _armed()
    if armed is None or armed[0] != "checkpoint-writing" or armed[1] not in (None, step):
        yield
        return
    done = threading.Event()

    def watch() -> None:
        # Polled every 0.2 ms: often enough to see a tiny model's shards being written,
        # without taking a core from the training it watches.
        while not done.wait(WATCH_SECONDS):
            try:
                names = os.listdir(directory)
            except FileNotFoundError:  # the first save creates the directory
                continue
            if any(name.endswith("_temp") for name in names):
                os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def writing_point(step: int) -> None:
    """The write callback's point; also where ``checkpoint-writing`` falls back to."""
    point("checkpoint-data-written", step)
    point("checkpoint-writing", step)
