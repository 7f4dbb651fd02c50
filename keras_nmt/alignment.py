"""Word alignments: Pharaoh files, alignments read off attention, alignment error rate.

An alignment is a set of links ``(i, j)``: source token ``i`` is aligned to target token
``j``, both 0-based indices into the tokens of :func:`keras_nmt.tokenizer.tokenize`. In a
Pharaoh file each line holds one sentence's links as space-separated ``i-j`` items (an
empty line is a sentence without links); ``i-j`` marks a *sure* link and ``i?j`` a
*possible* one, as in the usual AER gold standards. The built-in corpus writes sure links
only.

AER (Och & Ney, 2003) of predicted links A against sure links S and possible links P
(P includes S)::

    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

With sure links only (P = S) this is ``1 - 2 |A & S| / (|A| + |S|)``, one minus the F1
score of A against S. Over a corpus the counts are summed before dividing.

This module is pure Python and NumPy: no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Iterable, Sequence

import numpy as np

Link = tuple[int, int]


class AlignmentError(ValueError):
    """An alignment file or line that cannot be used; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class GoldAlignment:
    """One sentence's gold links; ``possible`` includes ``sure``."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def parse_pharaoh(line: str) -> GoldAlignment:
    """One Pharaoh line (``"0-0 1-2 2?1"``) -> its sure and possible links."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for item in line.split():
        separator = "-" if "-" in item else "?"
        source, _, target = item.partition(separator)
        if not (source.isdigit() and target.isdigit()):
            raise AlignmentError(f"not a Pharaoh link (expected I-J or I?J): {item!r}")
        link = (int(source), int(target))
        possible.add(link)
        if separator == "-":
            sure.add(link)
    return GoldAlignment(frozenset(sure), frozenset(possible))


def format_pharaoh(links: Iterable[Link], possible: Iterable[Link] = ()) -> str:
    """Links -> one Pharaoh line, sorted by source then target index; links given in
    ``possible`` and not in ``links`` are written as ``i?j``."""
    sure = set(links)
    items = [(i, j, "-") for i, j in sure] + [(i, j, "?") for i, j in set(possible) - sure]
    return " ".join(f"{i}{mark}{j}" for i, j, mark in sorted(items))


def read_pharaoh(path: str | os.PathLike) -> list[GoldAlignment]:
    """A Pharaoh file -> one GoldAlignment per line."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AlignmentError(f"alignment file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise AlignmentError(f"cannot read alignment file {path}: {error}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    alignments = []
    for number, line in enumerate(lines, 1):
        try:
            alignments.append(parse_pharaoh(line))
        except AlignmentError as error:
            raise AlignmentError(f"{path}, line {number}: {error}") from None
    return alignments


def write_pharaoh(path: str | os.PathLike, alignments: Iterable[Iterable[Link]]) -> None:
    """One line of sure links per sentence."""
    pathlib.Path(path).write_text(
        "".join(format_pharaoh(links) + "\n" for links in alignments), encoding="utf-8"
    )


def argmax_alignment(attention: np.ndarray, source_length: int, target_length: int) -> set[Link]:
    """Hard alignment from soft attention: each target token ``j`` is linked to the source
    token with the highest weight in row ``j``.

    ``attention`` is [target tokens (+ EOS), source tokens (+ EOS)], as
    :class:`keras_nmt.translator.Translation` and teacher forcing give it. Only the first
    ``target_length`` rows and ``source_length`` columns are used: the EOS row is dropped,
    and the argmax is taken among real source tokens, so weight put on the source EOS
    never produces a link. Ties go to the leftmost source token.
    """
    weights = np.asarray(attention)[:target_length, :source_length]
    if weights.size == 0:
        return set()
    if weights.shape != (target_length, source_length):
        raise ValueError(
            f"attention of shape {np.shape(attention)} does not cover {target_length} target "
            f"and {source_length} source tokens"
        )
    return {(int(i), j) for j, i in enumerate(np.argmax(weights, axis=1))}


@dataclasses.dataclass(frozen=True)
class AerCounts:
    predicted: int = 0  # |A|
    sure: int = 0  # |S|
    predicted_sure: int = 0  # |A & S|
    predicted_possible: int = 0  # |A & P|

    def __add__(self, other: "AerCounts") -> "AerCounts":
        return AerCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    @property
    def aer(self) -> float:
        denominator = self.predicted + self.sure
        if denominator == 0:
            return 0.0  # nothing predicted and nothing to find
        return 1.0 - (self.predicted_sure + self.predicted_possible) / denominator


def aer_counts(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] = ()) -> AerCounts:
    """One sentence's AER counts; ``possible`` may omit the sure links (they are added)."""
    predicted, sure = set(predicted), set(sure)
    possible = set(possible) | sure
    return AerCounts(len(predicted), len(sure), len(predicted & sure), len(predicted & possible))


def aer(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] = ()) -> float:
    """Alignment error rate of one sentence."""
    return aer_counts(predicted, sure, possible).aer


def corpus_aer(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]) -> AerCounts:
    """Summed AER counts over sentences (``.aer`` gives the corpus AER)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments for {len(gold)} gold ones")
    total = AerCounts()
    for links, reference in zip(predicted, gold):
        total = total + aer_counts(links, reference.sure, reference.possible)
    return total


def check_in_range(gold: GoldAlignment, source_length: int, target_length: int) -> str | None:
    """Why gold links do not fit sentences of these lengths, or None when they do."""
    for i, j in sorted(gold.possible):
        if i >= source_length:
            return f"link {i}-{j} names source token {i}, but the source has {source_length} tokens"
        if j >= target_length:
            return f"link {i}-{j} names target token {j}, but the reference has {target_length} tokens"
    return None
