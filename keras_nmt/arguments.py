"""Command-line pieces shared by train.py, translate and evaluate.

Every command reports bad input as one line ``PROG: error: ...`` and exit status 2;
these are the parser and the number types that make argparse do the same.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Callable, TextIO


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, not a usage dump."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _number(kind: type, accept: Callable[[float], bool], description: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {description}, got {text!r}") from None
        if not (accept(value) and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {description}, got {text!r}")
        return value

    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
non_negative_int = _number(int, lambda v: v >= 0, "a non-negative integer")
positive_float = _number(float, lambda v: v > 0, "a positive number")
non_negative_float = _number(float, lambda v: v >= 0, "a number >= 0")


def run_command(prog: str, body: Callable[[], int], stdout: TextIO, stderr: TextIO,
                user_errors: tuple[type[Exception], ...]) -> int:
    """Run a command's work and return its exit status: ``user_errors`` as one line
    ``PROG: error: ...`` (2), Ctrl-C (130), and output piped into a reader that stopped,
    such as ``head`` (1, quietly)."""
    try:
        return body()
    except user_errors as error:
        print(f"{prog}: error: {error}", file=stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=stderr)
        return 130
    except BrokenPipeError:
        # Point stdout at /dev/null so that Python's final flush does not fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        except (OSError, AttributeError, ValueError):
            pass
        return 1
