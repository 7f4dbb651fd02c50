"""The tags of a parsed line (:mod:`keras_nmt.text.markup`) put back into its translation,
where the attention says their words went.

- :func:`token_spans`: each token's character span in a text, by reading the tokens off
  the text left to right (whitespace skipped, SentencePiece's ``▁`` dropped; a token the
  text does not hold from there on is a span of no width at the cursor). The word
  tokenizer only splits and respaces, so its tokens are found exactly.
- :func:`aligned_sources`: each target token's source token, the argmax of its attention
  row (EOS row and column left out), sentence blocks offset: O(target x source tokens).
- :func:`place_tags`: a paired tag wraps the hull (first to last) of the target tokens
  aligned to the source tokens in its span; no target token aligned: the target tokens at
  the same relative place as its source tokens (a fallback). An item (void tag,
  untranslated span, placeholder) goes before the target of the source token after it,
  or after that of the token before it (the nearer one in the source; the other when the
  nearer has no target), else at the relative place (a fallback); its whitespace on each
  side follows the source's, and it never glues into a word. Then the tree is fitted top
  down: each node clipped to its parent's span, siblings kept in source order and not
  overlapping (a clip that moves a node is a fallback). The output is well-formed with
  the source's tag tree, its text escaped (``&``, ``<``, ``>``), tags copied as written.
  Cost: O(tags x tokens).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Sequence

import numpy as np

from keras_nmt.text.markup import Element, Item, Markup, Node, escape_text

Span = tuple[int, int]
_PIECE_MARK = "\u2581"  # SentencePiece's word start


def token_spans(text: str, tokens: Sequence[str]) -> list[Span]:
    """Each token's (start, end) in ``text``, read left to right; O(text x tokens) at worst
    (a token not found at the cursor is searched for in the rest of the text)."""
    spans, cursor = [], 0
    for token in tokens:
        piece = token.replace(_PIECE_MARK, "")
        while cursor < len(text) and text[cursor].isspace():
            cursor += 1
        found = text.find(piece, cursor) if piece else -1
        if found < 0:
            spans.append((cursor, cursor))
            continue
        spans.append((found, found + len(piece)))
        cursor = found + len(piece)
    return spans


def aligned_sources(blocks: Sequence[tuple[int, int, np.ndarray | None]]) -> list[int]:
    """Each target token's source token (-1: none) from sentence blocks (target tokens,
    source tokens, attention [target + 1, source + 1] or None), numbered across blocks."""
    links: list[int] = []
    offset = 0
    for targets, sources, attention in blocks:
        if attention is None or not sources:
            links += [-1] * targets
        else:
            links += [offset + int(k) for k in np.argmax(attention[:targets, :sources], axis=1)]
        offset += sources
    return links


class Alignment(NamedTuple):
    """What placement reads: the source text's token spans, the target text and its token
    spans, and each target token's source token (-1: none)."""

    source_spans: list[Span]
    target: str
    target_spans: list[Span]
    links: list[int]


@dataclasses.dataclass
class _Placed:
    """A node's place in the target text: [start, end) (an item: start == end), its
    children's places; the run of whitespace an item replaces is found at output."""

    node: Node
    start: int
    end: int
    children: list["_Placed"]


@dataclasses.dataclass
class _Counts:
    fallbacks: int = 0


class Placement(NamedTuple):
    """The marked-up translation and how often a fallback rule placed a tag."""

    text: str
    fallbacks: int


def place_tags(markup: Markup, alignment: Alignment) -> Placement:
    """``markup``'s tags in ``alignment.target`` by the rules of the module docstring."""
    counts = _Counts()
    placed = [_place(node, alignment, counts) for node in markup.nodes]
    _fit(placed, 0, len(alignment.target), counts)
    return Placement("".join(_emit(placed, alignment.target, 0, len(alignment.target))),
                     counts.fallbacks)


def _targets_of(sources: set[int], links: Sequence[int]) -> list[int]:
    return [j for j, k in enumerate(links) if k in sources]


def _relative(index: int, alignment: Alignment, end: bool = False) -> int:
    """The target character at the relative place of source token ``index``."""
    spans = alignment.target_spans
    if not spans:
        return len(alignment.target) if end else 0
    j = min(int(index * len(spans) / max(len(alignment.source_spans), 1)), len(spans) - 1)
    return spans[j][1] if end else spans[j][0]


def _place(node: Node, alignment: Alignment, counts: _Counts) -> _Placed:
    if isinstance(node, Item):
        return _Placed(node, *[_point(node.position, alignment, counts)] * 2, [])
    children = [_place(child, alignment, counts) for child in node.children]
    inside = [i for i, (a, b) in enumerate(alignment.source_spans)
              if a < node.end and b > node.start]
    if not inside:
        point = _point(node.start, alignment, counts)
        return _Placed(node, point, point, children)
    targets = _targets_of(set(inside), alignment.links)
    if not targets:
        counts.fallbacks += 1
        return _Placed(node, _relative(inside[0], alignment),
                       _relative(inside[-1], alignment, end=True), children)
    spans = alignment.target_spans
    return _Placed(node, spans[targets[0]][0], spans[targets[-1]][1], children)


def _point(position: int, alignment: Alignment, counts: _Counts) -> int:
    """Where markup at source character ``position`` goes in the target text."""
    spans = alignment.source_spans
    after = next((i for i, (a, b) in enumerate(spans) if a >= position and b > a), None)
    before = max((i for i, (a, b) in enumerate(spans) if b <= position and b > a), default=None)
    gap_after = spans[after][0] - position if after is not None else None
    gap_before = position - spans[before][1] if before is not None else None
    order = [(gap_after, after, False), (gap_before, before, True)]
    order.sort(key=lambda entry: (entry[0] is None, entry[0] or 0))
    for gap, index, is_before in order:
        if index is None:
            continue
        targets = _targets_of({index}, alignment.links)
        if targets:
            chosen = targets[-1] if is_before else targets[0]
            return alignment.target_spans[chosen][1 if is_before else 0]
    counts.fallbacks += 1
    if after is not None:
        return _relative(after, alignment)
    return _relative(before, alignment, end=True) if before is not None else 0


def _fit(placed: list[_Placed], low: int, high: int, counts: _Counts) -> None:
    """Clip ``placed`` (siblings, in source order) into [low, high], in order, apart."""
    cursor = low
    for entry in placed:
        start = min(max(entry.start, cursor), high)
        end = min(max(entry.end, start), high)
        counts.fallbacks += (start, end) != (entry.start, entry.end)
        entry.start, entry.end = start, end
        _fit(entry.children, start, end, counts)
        cursor = end


def _emit(placed: list[_Placed], text: str, low: int, high: int) -> list[str]:
    """The output of ``text[low:high]`` with ``placed`` (fitted) in it."""
    out, cursor = [], low
    for n, entry in enumerate(placed):
        if isinstance(entry.node, Element):
            out.append(escape_text(text[cursor:entry.start]))
            out += [entry.node.open_tag, *_emit(entry.children, text, entry.start, entry.end),
                    entry.node.close_tag]
            cursor = entry.end
            continue
        bound = placed[n + 1].start if n + 1 < len(placed) else high
        start, end = entry.start, entry.start
        while start > cursor and text[start - 1].isspace():
            start -= 1
        while end < bound and text[end].isspace():
            end += 1
        out.append(escape_text(text[cursor:start]))
        out += _spaced(entry.node, "".join(out)[-1:], text[end:end + 1])
        cursor = end
    out.append(escape_text(text[cursor:high]))
    return out


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _spaced(item: Item, before: str, after: str) -> list[str]:
    """An item between the output character ``before`` and the text character ``after``
    ("" at an edge): a space on each side the source had one, and on a side where the
    item would glue into a word (``$VAR`` + ``alpha`` would read as ``$VARalpha``)."""
    space_before = (item.space_before and before != "" and not before.isspace()
                    or _word_char(before) and _word_char(item.raw[:1]))
    space_after = (item.space_after and after != ""
                   or _word_char(after) and _word_char(item.raw[-1:]))
    return [" " * space_before, item.raw, " " * space_after]
