"""Scheduling priority of the server's threads (Linux): the threads that decode, parse large
bodies and load new versions run at a higher nice value than the event loop, so that when
decoding keeps every core busy, the loop, which reads each request and answers ``/health``,
is given a core first.

Linux keeps a nice value per thread (``setpriority`` on a thread id), and a new thread
starts with its creator's: onnxruntime's pool threads, made while a model loads, have the
loading thread's. Without privileges a thread's nice value can only go up, so each of the
server's work threads is lowered as it starts, and the command lowers the threads its model
loading made before it serves. Where there is no ``os.setpriority`` nothing changes.
"""

from __future__ import annotations

import os
import pathlib
import threading

TASKS = pathlib.Path("/proc/self/task")  # one entry per thread of this process (Linux)
MAX_NICE = 19  # Unix nice values run from -20 (scheduled first) to 19 (last)


def nice_of(tid: int | None = None) -> int:
    """The nice value of thread ``tid`` (default: the caller); 0 where it cannot be read."""
    if not hasattr(os, "getpriority"):
        return 0
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id() if tid is None else tid)
    except OSError:  # the thread has ended
        return 0


def lower(nice: int, tid: int | None = None) -> bool:
    """Thread ``tid`` (default: the caller) to nice value ``nice``, where that lowers its
    priority; whether it did."""
    if not hasattr(os, "setpriority"):
        return False
    tid = threading.get_native_id() if tid is None else tid
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) >= nice:
            return False
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:  # the thread has ended, or the system refuses
        return False
    return True


def lower_others(nice: int) -> int:
    """Every thread of this process but the caller to nice value ``nice`` (a command that
    owns its process, once its models are loaded); how many were lowered."""
    if not TASKS.is_dir():
        return 0
    me = threading.get_native_id()
    return sum(lower(nice, int(task.name)) for task in TASKS.iterdir()
               if task.name.isdigit() and int(task.name) != me)
