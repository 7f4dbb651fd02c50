"""Reading sentences from stdin, the same way for every command-line tool.

No TensorFlow here: ``serving/onnx_translate.py`` and ``serving/tfserving_client.py``
read their input with these functions as ``keras_nmt.translate`` does.
"""

from __future__ import annotations

import sys
from typing import BinaryIO


class InputError(ValueError):
    """Input text that cannot be read."""


def decode_line(raw: bytes, number: int) -> str:
    """One line's bytes (without its "\\n") as text; a trailing "\\r" is dropped."""
    try:
        return raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as error:
        raise InputError(
            f"input line {number} is not UTF-8 text (bad byte at column {error.start + 1})"
        ) from None


def read_lines(data: bytes) -> list[str]:
    """Split stdin's bytes into lines on "\\n" only (not on the other Unicode line
    breaks, which the tokenizer treats as spaces): a final newline ends the last line,
    it does not start an empty one."""
    if not data:
        return []
    chunks = data.split(b"\n")
    if chunks[-1] == b"":
        chunks.pop()
    return [decode_line(raw, number) for number, raw in enumerate(chunks, start=1)]


def binary(stream) -> BinaryIO:
    """The byte stream under a text stream (the stream itself when it has none)."""
    return getattr(stream, "buffer", stream)


def std_streams(stdin=None, stdout=None, stderr=None):
    """The streams a command's ``main`` was given, sys's where it was given none."""
    return (sys.stdin if stdin is None else stdin, sys.stdout if stdout is None else stdout,
            sys.stderr if stderr is None else stderr)
