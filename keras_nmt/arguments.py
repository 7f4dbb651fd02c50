"""Command-line pieces shared by train.py, translate and evaluate.

Every command reports bad input as one line ``PROG: error: ...`` and exit status 2;
these are the parser and the number types that make argparse do the same.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable


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
