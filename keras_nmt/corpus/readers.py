"""Lines of text, the one place that reads them: a text file (:func:`file_lines`), a
command's stdin (:func:`read_lines`, or :func:`stream_lines` as it arrives) and
line-aligned parallel files (finding, checking, counting them), all split on "\\n" and
decoded the same way.

Standard library only, so that reading a line of input (the ONNX path, the server)
loads nothing else."""

from __future__ import annotations

import dataclasses
import gzip
import io
import itertools
import pathlib
from typing import Iterable, Iterator

from keras_nmt.core.errors import CorpusError, InputError

SPLITS = ("train", "valid", "test")


def decode_line(raw: bytes, number: int, where: str, errors: str = "strict") -> str:
    """One line's bytes as text, without its line end (LF or CRLF). ``errors`` is
    ``bytes.decode``'s: with "strict", bytes that are not UTF-8 are an InputError naming
    ``where`` and the line."""
    try:
        return raw.decode("utf-8", errors).rstrip("\r\n")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{where}: line {number} is not UTF-8 text (bad byte at column {error.start + 1})"
        ) from None


def _decoded(raw_lines: Iterable[bytes], where: str, errors: str = "strict") -> Iterator[str]:
    for number, raw in enumerate(raw_lines, start=1):
        yield decode_line(raw, number, where, errors)


def read_lines(data: bytes, where: str = "input") -> list[str]:
    """Split bytes (a command's stdin) into lines on "\\n" only, not on the other Unicode
    line breaks, which the tokenizer treats as spaces: a final newline ends the last
    line, it does not start an empty one."""
    return list(_decoded(io.BytesIO(data), where))


def stream_lines(stream: Iterable[bytes], where: str = "input") -> Iterator[str]:
    """The lines of a binary stream (a command's stdin) as :func:`read_lines` splits and
    decodes them, each as soon as it has arrived: memory holds one line."""
    return _decoded(stream, where)


def file_lines(path: str | pathlib.Path, errors: str = "strict") -> Iterator[str]:
    """The lines of a text file (gzip when it ends in .gz) as :func:`read_lines` splits
    and decodes them, read one at a time. Raises OSError when it cannot be read, and
    InputError naming the file and line for bytes that are not UTF-8 (with the default
    ``errors``)."""
    path = pathlib.Path(path)
    with open_binary(path) as f:
        yield from _decoded(f, str(path), errors)


@dataclasses.dataclass(frozen=True)
class ParallelFiles:
    """One split: a source file and a target file, line i translating line i."""

    source: pathlib.Path
    target: pathlib.Path

    def pairs(self) -> Iterator[tuple[str, str]]:
        """(source, target) lines without their line ends (LF or CRLF).

        Raises CorpusError naming the file and line for invalid UTF-8, and naming both
        files and both counts when the line counts differ.
        """
        with open_binary(self.source) as src, open_binary(self.target) as tgt:
            for number, (s, t) in enumerate(itertools.zip_longest(src, tgt), start=1):
                if s is None or t is None:
                    # One file ended: count the rest of the other for the message.
                    rest = 1 + sum(1 for _ in (src if t is None else tgt))
                    counts = (number - 1 + rest, number - 1) if t is None else (number - 1, number - 1 + rest)
                    raise line_count_error(self, *counts)
                yield self._decode(s, self.source, number), self._decode(t, self.target, number)

    @staticmethod
    def _decode(raw: bytes, path: pathlib.Path, number: int) -> str:
        try:
            return decode_line(raw, number, str(path))
        except InputError as error:
            raise CorpusError(str(error)) from None

    def sides(self) -> tuple[list[str], list[str]]:
        """Both files whole: the source lines and the target lines, read and checked as
        :meth:`pairs` reads them. For held-out splits, which are small."""
        sources, targets = [], []
        for source, target in self.pairs():
            sources.append(source)
            targets.append(target)
        return sources, targets

    def check(self) -> int:
        """Read the whole split once (UTF-8, equal line counts); returns the pair count."""
        return sum(1 for _ in self.pairs())


def line_count_error(files: ParallelFiles, source_lines: int, target_lines: int) -> CorpusError:
    return CorpusError(f"line counts differ: {files.source} has {source_lines} lines, "
                       f"{files.target} has {target_lines}")


def open_binary(path: pathlib.Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def count_lines(path: pathlib.Path) -> int:
    """The lines of a text file as :meth:`ParallelFiles.pairs` numbers them (the last
    one with or without its line end), read as bytes: a quick pass that gives long
    passes over the file their total (and so an ETA)."""
    lines, last = 0, b"\n"
    with open_binary(path) as f:
        while block := f.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def find_split(directory: pathlib.Path, split: str, src: str, tgt: str) -> ParallelFiles | None:
    """The files of ``split`` in ``directory`` (``NAME.SRC`` or ``NAME.SRC.gz``), or None."""
    found = []
    for lang in (src, tgt):
        candidates = [directory / f"{split}.{lang}", directory / f"{split}.{lang}.gz"]
        existing = [p for p in candidates if p.is_file()]
        found.append(existing[0] if existing else None)
    if found[0] is None and found[1] is None:
        return None
    if None in found:
        missing = f"{split}.{src if found[0] is None else tgt}"
        raise CorpusError(f"{directory}: found one side of the {split} split but not {missing}")
    return ParallelFiles(found[0], found[1])


def find_corpus(directory: pathlib.Path, src: str, tgt: str) -> dict[str, ParallelFiles]:
    """train and valid are required, test is optional."""
    if not directory.is_dir():
        raise CorpusError(f"corpus directory not found: {directory}")
    splits = {}
    for split in SPLITS:
        files = find_split(directory, split, src, tgt)
        if files is None and split != "test":
            raise CorpusError(
                f"{directory}: expected {split}.{src} and {split}.{tgt} (optionally .gz)"
            )
        if files is not None:
            splits[split] = files
    return splits
