"""The answers of ``POST /translate`` and the server's JSON, written by one serializer.

:func:`encode` writes a value as JSON, the items of a :class:`Pieces` list one at a time
(each a short hold of the GIL, so the event loop's thread gets it between them while a
worker thread writes a large answer). :func:`translate_answer` is the JSON API's answer:
a line at a time, an alignment a sentence at a time. Cost: linear in the answer's size.
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
from aiohttp import web

from keras_nmt.decoding.confidence import line_fields
from keras_nmt.decoding.translation import Translation
from keras_nmt.serving import rest_formats as rest

ALIGNMENT_DECIMALS = 6  # attention weights lie in [0, 1]: 6 decimals are ±5e-7


class Pieces(list):
    """A JSON array that :func:`encode` writes an item at a time."""


def encode(value) -> str:
    """``value`` as JSON (UTF-8 text, not ASCII-escaped): dicts and :class:`Pieces` are
    written part by part, anything else by ``json.dumps`` whole."""
    if isinstance(value, dict):
        fields = (f"{json.dumps(str(key), ensure_ascii=False)}: {encode(item)}"
                  for key, item in value.items())
        return "{" + ", ".join(fields) + "}"
    if isinstance(value, Pieces):
        return "[" + ", ".join(encode(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def json_response(body, status: int = 200) -> web.Response:
    return web.Response(text=encode(body), status=status, content_type="application/json")


def error_response(status: int, reason: str) -> web.Response:
    """``{"error": REASON}``, the reason one line of printable text however much of a
    request it quotes (a newline in a path or a model name comes back as \\n)."""
    if not reason.isprintable():
        reason = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in reason)
    return json_response({"error": reason[:1000]}, status)


def translate_answer(model: str, version: int, beam: int, alpha: float, nbest: int,
                     lines: Sequence[Translation], align: bool, confidence: bool) -> dict:
    """The JSON API's answer (``encode`` it): each line's translation, its n-best list,
    ``unmet`` phrases, and with ``confidence`` / ``align`` its figures and alignment."""
    found = Pieces()
    for line in lines:
        entry = translation_fields(line, nbest)
        if line.unmet:
            entry["unmet"] = list(line.unmet)
        if confidence:
            entry.update(line_fields(line.confidence, [
                part.confidence for part in line.sentences or (line,)]))
        if align:
            # Each sentence's own alignment, never the line's (a dense matrix of all
            # its sentences, mostly zeros).
            entry["alignment"] = alignment_fields(line.sentences or (line,))
        found.append(entry)
    return {"model": model, "version": version, "beam": beam,
            "alpha": rest.float32_json(alpha), "translations": found}


def translation_fields(t: Translation, nbest: int) -> dict:
    return {
        "text": t.text, "score": rest.float32_json(t.score), "truncated": t.truncated,
        "nbest": [{"text": h.text, "score": rest.float32_json(h.score), "tokens": list(h.tokens)}
                  for h in t.hypotheses[:nbest]],
    }


def alignment_fields(parts: Sequence[Translation]) -> dict | None:
    """A line's alignment: a block for each sentence that has one (its own
    :class:`~keras_nmt.evaluation.forced.ForcedPair`), with where its tokens begin among
    the line's; None when none has (an empty line)."""
    blocks, source_start, target_start = Pieces(), 0, 0
    for part in parts:
        pair = part.alignment
        if pair is not None:
            blocks.append({
                "source_start": source_start, "target_start": target_start,
                "source_tokens": list(pair.source_tokens),
                "target_tokens": list(pair.target_tokens),
                "token_logprobs": _rounded(pair.token_logprobs),
                "attention": None if pair.attention is None else _rounded(pair.attention),
            })
        source_start += len(part.source_tokens)
        target_start += len(part.tokens)
    return {"sentences": blocks} if blocks else None


def _rounded(values: np.ndarray) -> list:
    return np.round(np.asarray(values, np.float64), ALIGNMENT_DECIMALS).tolist()
