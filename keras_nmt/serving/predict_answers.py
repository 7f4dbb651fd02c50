"""TF Serving's predict answers (and ``keras-nmt serve``'s, the same API) read into
:class:`~keras_nmt.decoding.translation.Translation` objects, each checked: an answer that
is not what the server sends raises :class:`ServingError` (one line).

The model's confidence in each translation (``RestTransport(..., confidence=True)``, the
command's ``--confidence``) is asked of ``keras-nmt serve`` too, over REST
(``"confidence": true``; :mod:`keras_nmt.serving.rest_formats`): each Translation's
``confidence`` holds the line's figure and its words' and, for a line of several
sentences, ``sentences`` holds one Translation per sentence with only its figure (the
server sends no more of them), what :class:`keras_nmt.cli.streaming.Output` writes.
TF Serving answers the same figures as the SavedModel's ``confidence`` (the line's),
``sentence_confidence``, ``words`` and ``word_confidence`` outputs.

Cost: linear in the answer's size.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from keras_nmt.core.errors import ServingError
from keras_nmt.decoding.confidence import Confidence
from keras_nmt.decoding.translation import Translation
from keras_nmt.serving.rest_formats import CONFIDENCE_OUTPUTS


def predictions(columns: dict, count: int, confidence: bool = False) -> list[Translation]:
    """Per-sentence translations from output columns, checking that they fit (a model
    without a ``scores`` output gives None scores); with ``confidence``, their
    confidences: keras-nmt serve's figures (the line's, its sentences', its words'), or
    the SavedModel's outputs of the same (the line's NaN for an empty line)."""
    if "translations" not in columns:
        raise ServingError(
            f"bad answer from server: no 'translations' output (got {sorted(columns)})"
        )
    texts = columns["translations"]
    scores = columns.get("scores", [None] * count)
    truncated = columns.get("truncated", [0] * count)
    unmet = columns.get("unmet", [None] * count)
    figures = {name: columns.get(name, [None] * count) for name in CONFIDENCE_OUTPUTS
               if confidence}
    for name, values in (("translations", texts), ("scores", scores), ("truncated", truncated),
                         ("unmet", unmet), *figures.items()):
        if not isinstance(values, list) or len(values) != count:
            got = len(values) if isinstance(values, list) else type(values).__name__
            raise ServingError(
                f"bad answer from server: {name} holds {got} values for {count} sentences"
            )
    if not all(isinstance(t, str) for t in texts):
        raise ServingError("bad answer from server: a translation that is not a string")
    if not all(u is None or isinstance(u, list) and all(isinstance(p, str) for p in u)
               for u in unmet):
        raise ServingError("bad answer from server: 'unmet' is not a list of phrases")
    try:
        found = [
            Translation(str(t), score=None if s is None else float(s), truncated=int(n),
                        unmet=tuple(u or ()))
            for t, s, n, u in zip(texts, scores, truncated, unmet)
        ]
    except (TypeError, ValueError) as error:
        raise ServingError(f"bad answer from server: {error}") from None
    if not confidence:
        return found
    if "word_confidences" not in columns:  # TF Serving: the SavedModel's figures
        figures.update(_savedmodel_figures(columns, count))
    return [_with_confidence(t, *values) for t, *values in zip(
        found, *(figures[name] for name in CONFIDENCE_OUTPUTS))]


def _savedmodel_figures(columns: dict, count: int) -> dict:
    """The SavedModel's ``sentence_confidence`` [N, S] (0 after a line's last sentence),
    ``words`` [N, W] ("" after its last word) and ``word_confidence`` [N, W], as the
    ``sentence_confidences`` and ``word_confidences`` keras-nmt serve answers; an empty
    line's NaN figure as null. An export written before it had them: the line's figure
    alone."""
    lines = [None if _no_figure(value) else value for value in columns["confidence"]]
    if not {"sentence_confidence", "words", "word_confidence"} <= set(columns):
        return {"confidence": lines, "sentence_confidences": [[]] * count,
                "word_confidences": [[]] * count}
    rows = [columns[name] for name in ("sentence_confidence", "words", "word_confidence")]
    if not (all(isinstance(row, list) and len(row) == count for row in rows) and all(
            isinstance(sentences, list) and isinstance(words, list)
            and isinstance(values, list) and len(words) == len(values)
            for sentences, words, values in zip(*rows))):
        raise ServingError("bad answer from server: sentence_confidence, words and "
                           f"word_confidence must be {count} rows, words as many as figures")
    return {"confidence": lines,
            "sentence_confidences": [[value for value in sentences if value != 0]
                                     for sentences in rows[0]],
            "word_confidences": [[[word, value] for word, value in zip(words, values)
                                  if word != ""] for words, values in zip(*rows[1:])]}


def _no_figure(value) -> bool:
    """Whether an answer's line figure says the line has none (null, NaN)."""
    return value is None or isinstance(value, float) and math.isnan(value)


def _figure(value) -> float:
    """A confidence figure of an answer, in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ServingError(f"bad answer from server: {value!r} is not a confidence in [0, 1]")
    return float(value)


def _confidence(figure: float, words: Sequence[tuple[str, float]] = ()) -> Confidence:
    """A Confidence of a figure the server rounded (to 0 for the least sure): its log as
    the mean log-probability; the token count is not sent (a client joins no lines)."""
    return Confidence(math.log(figure) if figure > 0 else -math.inf, 0,
                      tuple(word for word, _ in words), tuple(value for _, value in words))


def _with_confidence(t: Translation, line, sentences, words) -> Translation:
    """``t`` with the answer's ``confidence``, ``sentence_confidences`` and
    ``word_confidences`` (``[word, figure]`` pairs); none for an empty line (null)."""
    if line is None:
        return t
    if not isinstance(sentences, list) or not isinstance(words, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
            for pair in words):
        raise ServingError("bad answer from server: sentence_confidences must be a list of "
                           "figures, word_confidences of [word, figure] pairs")
    pairs = [(word, _figure(value)) for word, value in words]
    figures = [_figure(value) for value in sentences]
    parts = ()
    if len(figures) > 1:
        # The line's truncation stays with its first part, so that the count of truncated
        # sentences stays the line's (one when any was cut, as without parts).
        parts = tuple(Translation("", confidence=_confidence(figure),
                                  truncated=t.truncated if k == 0 else 0)
                      for k, figure in enumerate(figures))
    return dataclasses.replace(t, confidence=_confidence(_figure(line), pairs), sentences=parts)
