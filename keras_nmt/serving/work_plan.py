"""What a request will cost, sized once before any of it is queued: the one count that the
request limits, the queue bound, the batches, the deadline and the metrics all read.

:func:`plan` splits a request's lines into sentences, reads each as the search will
(its source tokens, cut to the model's maximum; its constraints encoded and placed by the
translator's own rules, :func:`keras_nmt.decoding.constraints.attach`) and gives a
:class:`WorkPlan`: one :class:`Row` a search row, weighed in the sentences it stands for
(a line with constraints that must be translated whole is one row of all its sentences).
Each limit is checked as soon as its count passes it, so a refused request costs no more
than the part of it read so far: characters (before any splitting), sentences, source and
constraint tokens, the cells of its force decoding (alignments, confidences) and the
largest tensor a step of its constrained search builds (:func:`search_cells`).

Cost: linear in the request's characters (splitting, tokenizing), plus its constraints'
tokens; nothing is decoded here.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from keras_nmt.core.errors import ConstraintError, RequestError
from keras_nmt.decoding.constraints import (
    Glossary, LineConstraints, SentenceConstraints, empty_lines_unmet,
)
from keras_nmt.decoding.translation import ReadLines, Source, Translation, read_lines
from keras_nmt.serving.options import ServerOptions
from keras_nmt.serving.registry import Servable
from keras_nmt.serving.rest_formats import bad
from keras_nmt.text.sentences import split_sentences

SPLIT_PREFIX = 16 << 10  # characters of a long line split first (then 4 times as many)
# Above these a request's answer is written in a worker thread (WorkPlan.heavy).
BIG_SENTENCES = 32
BIG_CELLS = 4096


@dataclasses.dataclass(frozen=True, eq=False)
class Row:
    """One search row: a source as the search reads it, with its constraints, weighed in
    the sentences it stands for. ``group``: the request whose constrained rows run
    together and apart from other requests' (their padding is their own plan's)."""

    source: Source
    sentences: int = 1
    group: object = None


@dataclasses.dataclass(frozen=True)
class WorkPlan:
    """A request's rows and what they cost (:func:`plan`)."""

    rows: list[Row]
    read: ReadLines  # the lines as read: each line's rows, for joining the results
    sentences: int  # once the lines are split: what the queue and the batches count
    tokens: int  # source tokens and the target tokens of the constraints
    cells: int  # force-decoding cells (alignments, confidences); 0 without
    search_cells: int  # the largest step tensor of its constrained search; 0 without

    @property
    def weights(self) -> list[int]:
        return [row.sentences for row in self.rows]

    @property
    def heavy(self) -> bool:
        """Whether the answer is worth a worker thread."""
        return max(len(self.rows), self.sentences) > BIG_SENTENCES or self.cells > BIG_CELLS

    def translations(self, results: Sequence[Translation], lang: str,
                     rules: Sequence[LineConstraints | None] | None,
                     lines: Sequence[str]) -> list[Translation]:
        """Each line's Translation from its rows' ``results``; an empty line's phrases to
        include are unmet (it is never decoded)."""
        return empty_lines_unmet(lines, rules, self.read.joined(results, lang))


@dataclasses.dataclass(frozen=True)
class Asked:
    """What a request asks of a model's search, as :func:`plan` sizes it."""

    beam: int
    split: bool
    force_decoded: str = ""  # "alignments", "confidences" or "": what is force-decoded
    rules: Sequence[LineConstraints | None] | None = None  # per line
    glossary: Glossary | None = None
    where: str = "text"  # the lines' name in a refusal


def plan(servable: Servable, limits: ServerOptions, lines: Sequence[str], asked: Asked,
         group: object = None) -> WorkPlan:
    """``lines`` sized as :class:`WorkPlan`; :class:`RequestError` 400 naming the limit's
    option at the first one passed, or the reason a line's constraints cannot be decoded."""
    check_chars(lines, limits)
    parts = _split(lines, servable.translator.src_lang, asked.split, limits.max_sentences)
    sources = _read_within(servable, parts, limits.max_tokens)
    constrain = _constrainer(servable, lines, asked)
    read = read_lines(lines, parts, lambda sentence: sources[sentence] if sentence in sources
                      else servable.translator.source(sentence), constrain)
    rows = _rows(read, group if constrain is not None else None)
    tokens = sum(len(row.source.tokens) + _constraint_tokens(row.source.constraints)
                 for row in rows)
    if tokens > limits.max_tokens:
        raise bad(f"more than {limits.max_tokens} tokens in one request, source tokens and "
                  f"the target tokens of its constraints; at most {limits.max_tokens} "
                  "(--max-tokens)")
    cells = sum(_cells(servable, row.source) for row in rows) if asked.force_decoded else 0
    if cells > limits.max_alignment_cells:
        raise too_many_cells(cells, limits.max_alignment_cells, asked.force_decoded)
    search = search_cells([row.source.constraints for row in rows if row.source.constraints],
                          asked.beam, limits.batch_size)
    if search > limits.max_search_cells:
        raise bad(f"the constraints need a search of {search} cells a step; at most "
                  f"{limits.max_search_cells} (--max-search-cells): ask for fewer or shorter "
                  "phrases, a smaller beam or fewer constrained sentences")
    return WorkPlan(rows, read, sum(map(len, parts)), tokens, cells, search)


def check_chars(lines: Sequence[str], limits: ServerOptions) -> None:
    """400 when ``lines`` hold more than ``max_chars`` characters: checked before any
    parsing, splitting or tokenizing is paid for."""
    chars = sum(map(len, lines))
    if chars > limits.max_chars:
        raise bad(f"{chars} characters of text in one request; at most "
                  f"{limits.max_chars} (--max-chars)")


def run_rows(translator, batch, batch_size: int, **search) -> list:
    """The Translations of a batch of rows (:class:`~keras_nmt.serving.batcher.Batch`),
    every n-best hypothesis the export returns: one onnxruntime run per kind of row
    (plain, each request's constrained rows, rare source words apart), each skipping the
    rows of requests that stopped waiting since the batch began (:meth:`Batch.alive`).
    ``search``: :meth:`OnnxTranslator.row_search`'s settings."""
    decoder = translator.row_search(nbest=min(translator.max_nbest, search["beam_size"]),
                                    batch_size=batch_size, **search)
    results: list = [decoder.blank] * len(batch)
    runs: dict = {}
    for i, row in enumerate(batch):
        if row.source.tokens:
            runs.setdefault((decoder.apart(row.source), id(row.group)), []).append(i)
    for members in runs.values():
        alive = batch.alive()
        members = [i for i in members if alive[i]]
        if not members:
            continue
        sources = [batch[i].source for i in members]
        found = decoder.decode(sources)
        if decoder.revise is not None:
            found = decoder.revise(sources, found)
        for i, translation in zip(members, found, strict=True):
            results[i] = translation
    return results


def search_cells(constraints: Sequence[SentenceConstraints], beam: int, batch_size: int) -> int:
    """The largest tensor a step of the constrained search builds for these rows, run at
    most ``batch_size`` at a time: each hypothesis' candidates (``beam`` + phrases) times
    the partial matches of every phrase to include and to avoid, padded to the rows'
    widest (:mod:`keras_nmt.search.constrained`)."""
    if not constraints:
        return 0
    include = max(len(c.include) for c in constraints)
    widest = max([len(p.ids) for c in constraints for p in c.include] or [1])
    avoid = max(len(c.avoid) for c in constraints)
    longest = max([len(p.ids) for c in constraints for p in c.avoid] or [1])
    matches = max(1, include) * widest + max(1, avoid) * longest
    return min(len(constraints), batch_size) * beam * (beam + include) * matches


def too_many_cells(cells: int, most: int, decoded: str = "alignments") -> RequestError:
    what = "may hold" if decoded == "alignments" else "force-decode up to"
    return bad(f"the {decoded} asked for {what} {cells} cells; at most {most} "
               "(--max-alignment-cells): ask for them for fewer or shorter sentences")


def _split(lines: Sequence[str], lang: str, split: bool, most: int) -> list[list[str]]:
    """Each line's sentences (``split``) or the line whole; 400 beyond ``most`` in all."""
    parts, count = [], 0
    for line in lines:
        found = split_within(line, lang, most - count) if split else [line]
        parts.append(found)
        count += len(found)
        if count > most:
            note = " once its lines are split into sentences" if split else ""
            raise bad(f"more than {most} sentences in one request{note}; at most {most} "
                      "(--max-sentences)")
    if not count:
        raise bad("no sentences to translate")
    return parts


def _read_within(servable: Servable, parts: list[list[str]], most: int) -> dict[str, Source]:
    """Each sentence read by the translator, until their source tokens pass ``most``."""
    sources: dict[str, Source] = {}
    tokens = 0
    for sentence in (sentence for found in parts for sentence in found):
        if sentence not in sources:
            sources[sentence] = servable.translator.source(sentence)
        source = sources[sentence]
        tokens += len(source.tokens)
        if tokens > most:
            raise bad(f"more than {most} source tokens in one request; at most {most} "
                      "(--max-tokens)")
    return sources


def _constrainer(servable: Servable, lines: Sequence[str], asked: Asked
                 ) -> Callable[[int, list], list | None] | None:
    """The translator's own placing of each line's constraints (:func:`attach`), its
    refusals a 400 naming the line; None for a request without constraints."""
    if not asked.rules and asked.glossary is None:
        return None
    translator = servable.translator
    if not translator.constrains:
        raise bad(f"model {servable.name!r} version {servable.version} has no constrained "
                  "search: export it again with --constrained for constraints, prefixes and "
                  "glossaries")
    attached = translator.constraint_attacher(asked.rules or None, asked.glossary)

    def constrain(n: int, items: list) -> list | None:
        try:
            return attached(n, items)
        except ConstraintError as error:
            raise bad(f"{asked.where}[{n}]: {error}") from None

    return constrain


def _rows(read: ReadLines, group: object) -> list[Row]:
    """Each item of ``read`` a row: a line kept whole weighs its sentences."""
    rows, start = [], 0
    for count, sentences in zip(read.counts, read.sentence_counts):
        weight = sentences if count == 1 else 1
        for source in read.items[start : start + count]:
            rows.append(Row(source, weight, group if source.constraints else None))
        start += count
    return rows


def _constraint_tokens(constraints: SentenceConstraints | None) -> int:
    if not constraints:
        return 0
    return (len(constraints.prefix.ids) + sum(len(p.ids) for p in constraints.include)
            + sum(len(p.ids) for p in constraints.avoid))


def _cells(servable: Servable, source: Source) -> int:
    """:meth:`Servable.alignment_cells` of a row, its output grown to hold its prefix and
    phrases (EOS included) as the constrained search grows it."""
    plain = servable.alignment_cells(len(source.tokens))
    if not source.constraints or not source.tokens:
        return plain
    needed = source.constraints.required_tokens() + 1
    return max(plain, needed * (len(source.tokens) + 1))


def split_within(line: str, lang: str, most: int, prefix: int = SPLIT_PREFIX) -> list[str]:
    """:func:`split_sentences` of ``line``, or, when the line certainly holds more than
    ``most`` sentences, more than ``most`` of them (a line of a million sentences is
    refused after reading a small part of it). Longer and longer prefixes are split
    first: a prefix's sentence boundaries are the line's but for one at the cut, so a
    prefix of more than ``most + 1`` sentences settles it."""
    size = prefix
    while size < len(line):
        found = split_sentences(line[:size], lang)
        if len(found) > most + 1:
            return found
        size *= 4
    return split_sentences(line, lang)
