"""How the translations of a line's sentences join into the line's translation, in pure
Python (:mod:`keras_nmt.text.sentences` splits the line).

Every path joins the same way (:func:`keras_nmt.decoding.translation.join_translations`, and the
SavedModel's graph, :mod:`keras_nmt.text.sentences_graph`): the text is the sentences'
translations in order, one space apart (no space in Chinese and Japanese; empty ones left
out), the tokens are concatenated, the truncated tokens summed, an attention matrix is
block-diagonal, and the score is the mean of the sentences' scores weighted by their source
lengths (:func:`line_nbest`), which an n-best list ranks by.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from keras_nmt.text.sentences import base_language

# Languages whose sentences follow one another without a space.
UNSPACED_LANGUAGES = frozenset({"zh", "ja", "yue"})


def sentence_separator(lang: str) -> str:
    """What goes between the translations of two sentences in language ``lang``."""
    return "" if base_language(lang) in UNSPACED_LANGUAGES else " "


def join_texts(texts: Sequence[str], lang: str = "") -> str:
    """The translations of a line's sentences as one text, in the target language
    ``lang`` (:func:`sentence_separator`): empty ones left out."""
    return sentence_separator(lang).join(text for text in texts if text)


def line_nbest(scores: Sequence[Sequence[float]], weights: Sequence[int], count: int,
               unmet: Sequence[Sequence[int]] | None = None
               ) -> list[tuple[float, tuple[int, ...]]]:
    """The ``count`` best translations of a line from its sentences' n-best lists: per
    sentence its hypotheses' scores (at least one) and its weight (source tokens + EOS)
    -> the line's best combinations of one hypothesis per sentence, best first, as
    (line score, the hypothesis chosen in each sentence). Fewer when fewer combinations
    exist. ``unmet``: per hypothesis the phrases to include it lacks; a combination
    missing fewer in all ranks first, whatever its score (as the constrained search
    ranks one sentence's hypotheses), then by score.

    The line score is the mean of the chosen hypotheses' scores weighted by the
    sentences' weights, ``sum(weight * score) / sum(weight)``: on the scale of one
    sentence's score (a per-token log-probability), so lines of different lengths compare.

    The lists are merged one sentence after another, each time keeping the ``count`` best
    sums of a kept combination and a hypothesis of the next sentence, found with a heap;
    that is exact, since (unmet, score) sums keep their order when a term is added, so a
    combination among the best has its prefix among the best prefixes. Ties go to the
    earlier combination, then the earlier hypothesis (in order of score, then position).
    The arithmetic is float32 in the order of the graph twin
    (:func:`keras_nmt.text.sentences_graph.join_nbest`, which joins no constrained line:
    the SavedModel translates those whole), so both give the same lists."""
    best: list[tuple[tuple[int, np.float32], tuple[int, ...]]] = [((0, np.float32(0.0)), ())]
    for n, (found, weight) in enumerate(zip(scores, weights, strict=True)):
        misses = unmet[n] if unmet is not None else [0] * len(found)
        order = sorted(range(len(found)), key=lambda k: (misses[k], -found[k]))
        values = [(misses[k], np.float32(weight) * np.float32(found[k])) for k in order]
        best = _best_sums(best, values, order, count)
    total = np.float32(sum(weights))
    return [(float(value / total), chosen) for (_, value), chosen in best]


def _best_sums(prefixes: list, values: list, order: list[int], count: int) -> list:
    """The ``count`` best of ``prefix + value`` over both lists of (unmet, score) sums,
    each best first: a heap of the frontier, which grows from (0, 0) one step along
    either list at a time."""
    def entry(i: int, j: int):
        (missed, total), (more, value) = prefixes[i][0], values[j]
        return (missed + more, -(total + value), i, j)

    frontier, seen, out = [entry(0, 0)], {(0, 0)}, []
    while frontier and len(out) < count:
        missed, total, i, j = heapq.heappop(frontier)
        out.append(((missed, -total), prefixes[i][1] + (order[j],)))
        for step in ((i + 1, j), (i, j + 1)):
            if step[0] < len(prefixes) and step[1] < len(values) and step not in seen:
                seen.add(step)
                heapq.heappush(frontier, entry(*step))
    return out


def block_diagonal(matrices: Sequence[np.ndarray]) -> np.ndarray:
    """The matrices one after the other along the diagonal, zeros elsewhere (the
    attention of a line: each sentence's rows and columns, in order). Dense: it costs
    (sum of rows) x (sum of columns) cells, which for a line of many sentences is far
    more than the matrices themselves."""
    rows = sum(matrix.shape[0] for matrix in matrices)
    columns = sum(matrix.shape[1] for matrix in matrices)
    dtype = np.result_type(*matrices) if matrices else np.float32
    out = np.zeros((rows, columns), dtype)
    row = column = 0
    for matrix in matrices:
        out[row : row + matrix.shape[0], column : column + matrix.shape[1]] = matrix
        row, column = row + matrix.shape[0], column + matrix.shape[1]
    return out
