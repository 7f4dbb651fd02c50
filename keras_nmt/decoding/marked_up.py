"""Translating lines of inline markup (``markup="html"|"xml"``): each line parsed
(:mod:`keras_nmt.text.markup`), its text translated by any translator whose Translations
carry attention, its tags put back where the attention says
(:mod:`keras_nmt.text.tag_placement`).

A line of several sentences is split and joined by the translator as any line is; the
joined attention is block-diagonal, so a tag that spans sentences wraps the hull of its
words' targets across them. The attention is each sentence's own ``attention`` (Keras:
``with_attention=True``), else its ``alignment.attention`` (onnxruntime: ``align=True``).
No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from keras_nmt.core.errors import MarkupError
from keras_nmt.decoding.translation import Translation
from keras_nmt.text.markup import KINDS, Markup, MarkupOptions, parse_markup
from keras_nmt.text.tag_placement import Alignment, aligned_sources, place_tags, token_spans


@dataclasses.dataclass(frozen=True)
class MarkedUp:
    """One line's marked-up translation: ``text``; the plain ``translation`` under it;
    ``fallbacks``, tags a fallback rule placed; ``repairs``, repairs of the source."""

    text: str
    translation: Translation
    fallbacks: int = 0
    repairs: int = 0


def check_markup(kind: str | None) -> str | None:
    """``kind`` if it is None or a known markup, else :class:`MarkupError`."""
    if kind is not None and kind not in KINDS:
        raise MarkupError(f"unknown markup {kind!r}; known: {', '.join(KINDS)}")
    return kind


def _attention(part: Translation) -> np.ndarray | None:
    if part.attention is not None:
        return part.attention
    return part.alignment.attention if part.alignment is not None else None


def alignment_of(source_text: str, translation: Translation) -> Alignment:
    """What placement reads from a line's plain text and its Translation: its sentences'
    token spans and argmax links. Cost: O(target x source tokens) per sentence."""
    parts = translation.sentences or (translation,)
    source_tokens = [token for part in parts for token in part.source_tokens]
    target_tokens = [token for part in parts for token in part.tokens]
    blocks = [(len(part.tokens), len(part.source_tokens), _attention(part)) for part in parts]
    return Alignment(token_spans(source_text, source_tokens), translation.text,
                     token_spans(translation.text, target_tokens), aligned_sources(blocks))


def translate_marked_up(translate: Callable[[list[str]], Sequence[Translation]],
                        lines: Sequence[str], markup: str,
                        options: MarkupOptions = MarkupOptions()) -> list[MarkedUp]:
    """Each line of ``lines`` (markup ``markup``) translated with its tags kept:
    ``translate(texts)`` gives the plain texts' Translations with attention
    (:mod:`module docstring <keras_nmt.decoding.marked_up>`). A line that cannot be read
    is a :class:`MarkupError` naming it, before anything is translated."""
    parsed = parse_lines(lines, markup, options)
    translations = translate([found.text for found in parsed])
    return [marked_up(found, translation)
            for found, translation in zip(parsed, translations, strict=True)]


def parse_lines(lines: Sequence[str], markup: str, options: MarkupOptions = MarkupOptions(),
                name: Callable[[int], str] = lambda n: f"line {n + 1}") -> list[Markup]:
    """Each line parsed; a :class:`MarkupError` naming the first that cannot be read
    (``name(n)``), before anything is translated. Cost: linear in the lines' length."""
    check_markup(markup)
    parsed = []
    for n, line in enumerate(lines):
        try:
            parsed.append(parse_markup(line, markup, options))
        except MarkupError as error:
            raise MarkupError(f"{name(n)}: {error}") from None
    return parsed


def marked_up(found: Markup, translation: Translation) -> MarkedUp:
    """``found``'s tags placed in the translation of its text (which carries attention)."""
    placed = place_tags(found, alignment_of(found.text, translation))
    return MarkedUp(placed.text, translation, placed.fallbacks, found.repairs)


def marking_up(translate: Callable[..., Sequence[Translation]], markup: str,
               options: MarkupOptions = MarkupOptions()) -> Callable[..., list[Translation]]:
    """``translate(lines, **settings)`` (which must give attention) as a function of the
    same call whose Translations' ``text`` is marked up (:func:`translate_marked_up`)."""
    check_markup(markup)

    def run(lines: Sequence[str], **settings) -> list[Translation]:
        found = translate_marked_up(lambda texts: translate(texts, **settings), lines,
                                    markup, options)
        return [dataclasses.replace(line.translation, text=line.text) for line in found]

    return run
