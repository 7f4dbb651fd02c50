"""Word alignments: Pharaoh files, alignments read off attention, alignment error rate.

An alignment is a set of links ``(i, j)``, 0-based indices of source and target words of
:func:`keras_nmt.text.word.tokenize`. A Pharaoh line holds one sentence's links, ``i-j``
sure and ``i?j`` possible (an empty line: no links). AER (Och & Ney, 2003) of links A
against sure S and possible P (P includes S) is ``1 - (|A & S| + |A & P|) / (|A| + |S|)``,
counts summed over a corpus before dividing.

:func:`alignment_report` force-decodes the reference and links each reference token to the
source token it attends to most (EOS left out); for a SentencePiece run, piece links become
links of the words holding them (:func:`gold_words_of_tokens`). Reading and scoring are
pure Python and NumPy; only :func:`forced_attention` imports TensorFlow. Cost: linear in
the links; the forced decode is one teacher-forced pass per batch.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import pathlib
import unicodedata
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from keras_nmt.corpus.readers import file_lines
from keras_nmt.core.errors import AlignmentError, EvaluationError, InputError
from keras_nmt.text import codecs, word

Link = tuple[int, int]


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
        lines = list(file_lines(path))
    except FileNotFoundError:
        raise AlignmentError(f"alignment file not found: {path}") from None
    except (OSError, InputError) as error:
        raise AlignmentError(f"cannot read alignment file {path}: {error}") from None
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
    :class:`keras_nmt.decoding.translation.Translation` and teacher forcing give it. Only the first
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


# ---------------------------------------------------------------------------- a model's alignments

def gold_words_of_tokens(tokens: Sequence[str], words: Sequence[str]) -> list[int]:
    """For each of a run's tokens of a sentence, the index of the word (of
    :func:`keras_nmt.word.tokenize`, the gold alignments' tokens) it lies in.

    Tokens and words are placed by their first character in the sentence with spaces
    and SentencePiece's word-start mark removed, words NFKC-normalised as SentencePiece's
    default normaliser does ("…" is "..." to it). Should the two texts still differ in
    length, positions are scaled from one to the other."""
    if list(tokens) == list(words):
        return list(range(len(words)))
    pieces = [t.replace("\u2581", "") for t in tokens]
    starts, position = [], 0
    for whole in words:
        starts.append(position)
        position += len(unicodedata.normalize("NFKC", whole))
    scale = position / max(1, sum(len(p) for p in pieces))
    index, position = [], 0
    for piece in pieces:
        where = position * scale
        index.append(max(0, bisect.bisect_right(starts, where) - 1))
        position += len(piece)
    return index


def word_links(links, source_words: Sequence[int], target_words: Sequence[int]) -> set[Link]:
    """Token links -> the links of the words holding the two tokens
    (:func:`gold_words_of_tokens`)."""
    return {(source_words[i], target_words[j]) for i, j in links}


def forced_attention(
    translator, sources: Sequence[str], references: Sequence[str], batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
) -> list[np.ndarray | None]:
    """Teacher-force each reference through the model
    (:func:`keras_nmt.evaluation.forced.force_decode`); per sentence the attention
    weights [reference tokens + EOS, source tokens + EOS] (None when a side is empty:
    there is nothing to align)."""
    from keras_nmt.evaluation.forced import force_decode

    pairs = force_decode(translator, sources, references, batch_size, attention=True,
                         progress=progress)
    return [pair.attention if pair.source_tokens and pair.target_tokens else None
            for pair in pairs]


def alignment_report(
    translator, sources: Sequence[str], references: Sequence[str], gold: Sequence[GoldAlignment],
    batch_size: int = 32, progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[set[Link]]]:
    """AER of the argmax attention of the force-decoded reference against ``gold``.
    Returns the report and the predicted links (one set per sentence)."""
    if len(gold) != len(sources):
        raise EvaluationError(f"{len(gold)} gold alignments for {len(sources)} sentences")
    attention = forced_attention(translator, sources, references, batch_size, progress)
    predicted: list[set[Link]] = []
    scored = []
    for i, weights in enumerate(attention):
        if weights is None:
            predicted.append(set())
            continue
        # Rows and columns beyond the tokens are the EOS ones.
        links = argmax_alignment(weights, weights.shape[1] - 1, weights.shape[0] - 1)
        if translator.source_codec.kind != codecs.WORD or translator.target_codec.kind != codecs.WORD:
            # Gold links join words: a piece link stands for the link of its two words.
            links = word_links(links, *(
                gold_words_of_tokens(c.tokenize(line), word.tokenize(line, c.lang))
                for c, line in ((translator.source_codec, sources[i]),
                                (translator.target_codec, references[i]))
            ))
        predicted.append(links)
        scored.append(i)
    counts = corpus_aer([predicted[i] for i in scored], [gold[i] for i in scored])
    report = {
        "aer": counts.aer,
        "sentences": len(scored),
        "predicted_links": counts.predicted,
        "sure_links": counts.sure,
        "correct_sure_links": counts.predicted_sure,
        "correct_possible_links": counts.predicted_possible,
        "method": "argmax attention over source tokens, reference force-decoded, EOS excluded"
                  + ("" if translator.source_codec.kind == codecs.WORD
                     else "; piece links mapped to the words holding them"),
    }
    return report, predicted


def default_alignment_path(src: str | os.PathLike) -> pathlib.Path:
    """SRC_STEM.align next to --src: test.en -> test.align, test.en.gz -> test.align."""
    path = pathlib.Path(src)
    if path.suffix == ".gz":
        path = path.with_suffix("")
    return path.with_suffix(".align")


def read_gold(
    path: pathlib.Path, sources: Sequence[str], references: Sequence[str], src_lang: str, tgt_lang: str,
    src_path: pathlib.Path,
) -> list[GoldAlignment]:
    """Gold alignments, checked against the sentences: one line per sentence and every
    link inside the tokenized source and reference."""
    gold = read_pharaoh(path)
    if len(gold) != len(sources):
        raise EvaluationError(
            f"line counts differ: alignment file {path} has {len(gold)} lines, {src_path} has {len(sources)}"
        )
    for number, (links, source, reference) in enumerate(zip(gold, sources, references), 1):
        problem = check_in_range(
            links, len(word.tokenize(source, src_lang)), len(word.tokenize(reference, tgt_lang))
        )
        if problem:
            raise EvaluationError(f"{path}, line {number}: {problem} (tokenized with keras_nmt.text.word)")
    return gold
