"""What a user says the output of a line must respect, as the search takes it
(docs/decoding.md, "Constraints"): a line's :class:`LineConstraints` (phrases to include
and avoid, a prefix; from ``--constraints``, a request or a :class:`Glossary`) becomes per
sentence a :class:`SentenceConstraints` of target ids for :mod:`keras_nmt.search.constrained`.

- Phrases are tokenized by the target codec; a word outside the vocabulary is ``<unk>``
  there, and :func:`read_output` writes the word back where the search put it, one
  ``<unk>`` per word (:func:`phrase_ends`, the search's own rule).
- A glossary term applies where the line's source tokens hold its source tokens; on a
  split line a phrase goes to the sentence of its source term (:func:`assign`), else the
  line is translated whole. Phrases to avoid apply to every sentence.
- Bad input is a one-line :class:`~keras_nmt.core.errors.ConstraintError`.

No TensorFlow. Cost: linear in the line's tokens and the phrases' tokens.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Callable, Sequence

import numpy as np

from keras_nmt.core.constants import EOS_ID, PAD_ID, UNK, UNK_ID
from keras_nmt.corpus.readers import file_lines
from keras_nmt.core.errors import ConstraintError

MAX_PHRASES = 16  # phrases to include, and to avoid, per sentence


@dataclasses.dataclass(frozen=True)
class LineConstraints:
    """A line's constraints, as text: ``include`` phrases must appear in its translation,
    ``avoid`` phrases must not, and it must start with ``prefix``. ``sources`` holds, for
    each phrase of ``include``, its source term when known (a glossary's), else None."""

    include: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    prefix: str = ""
    sources: tuple[str | None, ...] = ()

    def __post_init__(self):
        if not self.sources:
            object.__setattr__(self, "sources", (None,) * len(self.include))
        if len(self.sources) != len(self.include):
            raise ValueError("one source term (or None) per phrase to include")

    def __bool__(self) -> bool:
        return bool(self.include or self.avoid or self.prefix)

    def merged(self, other: "LineConstraints") -> "LineConstraints":
        """Both sets of constraints; the prefix of ``other`` when it has one."""
        return LineConstraints(self.include + other.include, self.avoid + other.avoid,
                               other.prefix or self.prefix, self.sources + other.sources)


def parse_constraints(value, where: str = "constraints") -> LineConstraints:
    """A line's constraints from JSON-like ``value``: a list of phrases to include, or an
    object with any of ``"constraints"`` (or ``"include"``), ``"avoid"`` (lists of
    phrases) and ``"prefix"`` (a string); null or an empty list: none."""
    if value is None:
        return LineConstraints()
    if isinstance(value, list):
        value = {"constraints": value}
    if not isinstance(value, dict):
        raise ConstraintError(f"{where}: expected a list of phrases or an object, "
                              f"got {type(value).__name__}")
    unknown = set(value) - {"constraints", "include", "avoid", "prefix"}
    if unknown:
        raise ConstraintError(f"{where}: unknown key(s) {sorted(unknown)}; use "
                              "'constraints', 'avoid' and 'prefix'")

    def phrases(key: str) -> tuple[str, ...]:
        found = value.get(key) or []
        if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
            raise ConstraintError(f"{where}: '{key}' must be a list of strings")
        return tuple(found)

    prefix = value.get("prefix") or ""
    if not isinstance(prefix, str):
        raise ConstraintError(f"{where}: 'prefix' must be a string")
    return LineConstraints(phrases("constraints") + phrases("include"), phrases("avoid"),
                           prefix)


def _lines(path: str | os.PathLike) -> list[str]:
    try:
        return list(file_lines(path))
    except OSError as error:
        raise ConstraintError(f"cannot read {path}: {error.strerror or error}") from None


def read_constraints(path: str | os.PathLike) -> list[LineConstraints]:
    """``--constraints FILE``: one JSON value a line (:func:`parse_constraints`), aligned
    with the input; an empty line is no constraint."""
    found = []
    for number, line in enumerate(_lines(path), 1):
        try:
            value = json.loads(line) if line.strip() else None
        except json.JSONDecodeError as error:
            raise ConstraintError(f"{path}:{number}: not JSON ({error.msg})") from None
        found.append(parse_constraints(value, f"{path}:{number}"))
    return found


def read_prefixes(path: str | os.PathLike) -> list[LineConstraints]:
    """``--prefix FILE``: one target prefix a line, aligned with the input."""
    return [LineConstraints(prefix=line.strip()) for line in _lines(path)]


@dataclasses.dataclass(frozen=True)
class Glossary:
    """Source term -> target term pairs (``--glossary TSV``)."""

    terms: tuple[tuple[str, str], ...]

    @classmethod
    def read(cls, path: str | os.PathLike) -> "Glossary":
        """A TSV of ``source term<TAB>target term`` lines (blank lines and lines starting
        with ``#`` skipped)."""
        terms = []
        for number, line in enumerate(_lines(path), 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise ConstraintError(f"{path}:{number}: expected 'source term<TAB>target "
                                      "term'")
            terms.append((fields[0].strip(), fields[1].strip()))
        return cls(tuple(terms))

    def for_line(self, source_tokens: Sequence[str], tokenize: Callable[[str], list[str]]
                 ) -> LineConstraints:
        """The terms whose source side occurs in ``source_tokens`` (a line tokenized by
        the source codec, whose ``tokenize`` reads the terms too), as phrases to include,
        in the glossary's order (a target term once). For many lines: :meth:`matcher`."""
        return self.matcher(tokenize)(source_tokens)

    def matcher(self, tokenize: Callable[[str], list[str]]
                ) -> Callable[[Sequence[str]], LineConstraints]:
        """:meth:`for_line` with the terms tokenized once and indexed by their first
        token: a line then costs its own tokens (times the terms that start with each),
        not a pass over the whole glossary."""
        entries = [(tuple(tokenize(source)), source, target) for source, target in self.terms]
        starting: dict[str, list[int]] = {}
        for n, (tokens, _, _) in enumerate(entries):
            if tokens:
                starting.setdefault(tokens[0], []).append(n)

        def match(source_tokens: Sequence[str]) -> LineConstraints:
            line = tuple(source_tokens)
            found = {n for i, token in enumerate(line) for n in starting.get(token, ())
                     if line[i : i + len(entries[n][0])] == entries[n][0]}
            include: list[str] = []
            sources: list[str] = []
            for n in sorted(found):
                _, source, target = entries[n]
                if target not in include:
                    include.append(target)
                    sources.append(source)
            return LineConstraints(tuple(include), sources=tuple(sources))

        return match


def find(tokens: Sequence[str], phrase: Sequence[str], start: int = 0) -> int:
    """The first position >= ``start`` where ``phrase`` occurs in ``tokens``, or -1."""
    phrase = list(phrase)
    if not phrase:
        return -1
    for i in range(start, len(tokens) - len(phrase) + 1):
        if list(tokens[i : i + len(phrase)]) == phrase:
            return i
    return -1


@dataclasses.dataclass(frozen=True)
class Phrase:
    """A phrase as the target codec reads it: its tokens, and their ids (UNK for a token
    outside the vocabulary, the placeholder :func:`read_output` fills)."""

    tokens: tuple[str, ...]
    ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class SentenceConstraints:
    """One sentence's constraints in target tokens: what the search decodes, and the
    glossary's terms its line had no room for (``unplaced``: reported unmet, never
    searched; a sentence with only those takes the plain search)."""

    include: tuple[Phrase, ...] = ()
    avoid: tuple[Phrase, ...] = ()
    prefix: Phrase = Phrase((), ())
    unplaced: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.include or self.avoid or self.prefix.tokens)

    def required_tokens(self) -> int:
        """Tokens the output must hold: the prefix's and every phrase's to include."""
        return len(self.prefix.ids) + sum(len(p.ids) for p in self.include)

    def met_by(self, tokens: Sequence[str]) -> bool:
        """Whether ``tokens`` (an output) hold every phrase to include, none to avoid, and
        start with the prefix."""
        prefix = self.prefix.tokens
        return (all(find(tokens, p.tokens) >= 0 for p in self.include)
                and all(find(tokens, p.tokens) < 0 for p in self.avoid)
                and tuple(tokens[: len(prefix)]) == tuple(prefix))


class Encoder:
    """Turns :class:`LineConstraints` into :class:`SentenceConstraints` with a target
    codec, checking them against ``max_output`` tokens (EOS included), the most a
    sentence may generate."""

    def __init__(self, target_codec, max_output: int):
        self.codec = target_codec
        self.max_output = int(max_output)

    def phrase(self, text: str, what: str) -> Phrase:
        tokens = tuple(self.codec.tokenize(text))
        if not tokens:
            raise ConstraintError(f"{what} {text!r} is empty once tokenized")
        ids = tuple(self.codec.vocabulary.encode(tokens))
        if any(i in (PAD_ID, EOS_ID) for i in ids) or len(ids) != len(tokens):
            raise ConstraintError(f"{what} {text!r} holds a reserved token")
        return Phrase(tokens, ids)

    def encode(self, found: LineConstraints) -> SentenceConstraints:
        """One sentence's constraints, checked (:class:`~keras_nmt.core.errors.ConstraintError`)."""
        for what, phrases in (("phrases to include", found.include),
                              ("phrases to avoid", found.avoid)):
            if len(phrases) > MAX_PHRASES:
                raise ConstraintError(f"{len(phrases)} {what}: at most {MAX_PHRASES} a line")
        # Not deduplicated: each phrase stays at the place of its source term (assign).
        include = tuple(self.phrase(p, "constraint") for p in found.include)
        avoid = tuple(dict.fromkeys(self.phrase(p, "phrase to avoid") for p in found.avoid))
        prefix = self.phrase(found.prefix, "prefix") if found.prefix.strip() else Phrase((), ())
        for bad in avoid:
            for phrase in include:
                if find(phrase.tokens, bad.tokens) >= 0:
                    raise ConstraintError(
                        f"constraint {' '.join(phrase.tokens)!r} holds "
                        f"{' '.join(bad.tokens)!r}, a phrase to avoid")
            if find(prefix.tokens, bad.tokens) >= 0:
                raise ConstraintError(
                    f"the prefix holds {' '.join(bad.tokens)!r}, a phrase to avoid")
        encoded = SentenceConstraints(include, avoid, prefix)
        if encoded.required_tokens() + 1 > self.max_output:
            raise ConstraintError(
                f"the prefix and constraints need {encoded.required_tokens()} tokens, more "
                f"than an output may have ({self.max_output - 1})")
        return encoded

    def fitting(self, own: LineConstraints, terms: LineConstraints
                ) -> tuple[LineConstraints, tuple[str, ...]]:
        """``own`` (a line's constraints, checked by :meth:`encode` as they are) with as
        many of a glossary's ``terms`` as the line has room for, in their order: at most
        :data:`MAX_PHRASES`, within the output's length, none empty, reserved or holding
        a phrase to avoid. Returns them and the terms left out. Cost: each term tokenized
        once."""
        checked = self.encode(own)  # the line's own, as assign checks them
        room = self.max_output - 1 - checked.required_tokens()
        kept, sources, left = [], [], []
        for target, source in zip(terms.include, terms.sources):
            try:
                phrase = self.phrase(target, "constraint")
            except ConstraintError:
                left.append(target)
                continue
            if (len(own.include) + len(kept) >= MAX_PHRASES or len(phrase.ids) > room
                    or any(find(phrase.tokens, bad.tokens) >= 0 for bad in checked.avoid)):
                left.append(target)
                continue
            kept.append(target)
            sources.append(source)
            room -= len(phrase.ids)
        found = own.merged(dataclasses.replace(terms, include=tuple(kept), sources=tuple(sources)))
        return found, tuple(left)


def check_aligned(lines: Sequence[str], per_line: Sequence | None) -> None:
    """ValueError unless ``per_line`` (constraints, None: none) has one entry a line."""
    if per_line is not None and len(per_line) != len(lines):
        raise ValueError(f"{len(per_line)} constraints for {len(lines)} lines")


def max_output_tokens(max_source_len: int, max_decode_ratio: float) -> int:
    """The most tokens a search gives a sentence of ``max_source_len`` tokens (EOS
    included, the ratio rule of :func:`keras_nmt.search.lengths.decode_limits`)."""
    return math.ceil(max_decode_ratio * (max_source_len + 1)) + 1


def sentence_of_phrase(phrase: Phrase, source: str | None, sentences: Sequence[Sequence[str]],
                       tokenize: Callable[[str], list[str]],
                       sources_of: Callable[[Sequence[int]], Sequence[set[str]]] | None
                       ) -> int | None:
    """Which of ``sentences`` (source tokens) a phrase to include belongs to: the first
    holding its ``source`` term; without one, the first holding a source word that
    ``sources_of`` (per target id, the source words that translate to it) names for one
    of the phrase's ids. None when no sentence can be told."""
    if source is not None:
        wanted = tokenize(source)
        for n, tokens in enumerate(sentences):
            if find(tokens, wanted) >= 0:
                return n
        return None
    if sources_of is None:
        return None
    words = set().union(*sources_of([i for i in phrase.ids if i != UNK_ID]))
    for n, tokens in enumerate(sentences):
        if words & set(tokens):
            return n
    return None


def assign(found: LineConstraints, encoder: Encoder, sentences: Sequence[Sequence[str]],
           tokenize: Callable[[str], list[str]],
           sources_of: Callable[[Sequence[int]], Sequence[set[str]]] | None = None
           ) -> list[SentenceConstraints] | None:
    """Each sentence's constraints, for a line split into ``sentences`` (their source
    tokens); None when the line must be translated whole (a prefix, or a phrase no
    sentence can be told for: see the module docstring). The line's constraints are
    checked as a whole first."""
    whole = encoder.encode(found)
    if len(sentences) <= 1:
        return [whole]
    if whole.prefix.tokens:
        return None
    parts: list[list[Phrase]] = [[] for _ in sentences]
    for phrase, source in zip(whole.include, found.sources):
        n = sentence_of_phrase(phrase, source, sentences, tokenize, sources_of)
        if n is None:
            return None
        parts[n].append(phrase)
    return [SentenceConstraints(tuple(part), whole.avoid) for part in parts]


def attach(per_line: Sequence[LineConstraints | None] | None, encoder: Encoder,
           tokenize: Callable[[str], list[str]], glossary: Glossary | None = None,
           sources_of: Callable[[Sequence[int]], Sequence[set[str]]] | None = None
           ) -> Callable[[int, list], list | None]:
    """:func:`keras_nmt.decoding.translation.translate_lines`' ``constrain``: line n's
    constraints (``per_line[n]``, and the ``glossary``'s terms its source holds) given to
    its sentences (:class:`~keras_nmt.decoding.translation.Source` items), or None when the line
    must be translated whole (:func:`assign`). ``tokenize`` is the source codec's."""
    terms_of = None if glossary is None else glossary.matcher(tokenize)

    def constrain(n: int, items: list) -> list | None:
        found = (per_line[n] if per_line else None) or LineConstraints()
        unplaced: tuple[str, ...] = ()
        if terms_of is not None:  # terms beyond the line's room are reported, not fatal
            found, unplaced = encoder.fitting(
                found, terms_of([token for item in items for token in item.tokens]))
        if not found and not unplaced:
            return items
        assigned = (assign(found, encoder, [item.tokens for item in items], tokenize, sources_of)
                    if found else [SentenceConstraints() for _ in items])
        if assigned is None:
            return None
        assigned[0] = dataclasses.replace(assigned[0], unplaced=unplaced)
        return [dataclasses.replace(item, constraints=c if c or c.unplaced else None)
                for item, c in zip(items, assigned)]

    return constrain


def lexicon_sources(lexicon, source_vocabulary, best: int = 10
                    ) -> Callable[[Sequence[int]], list[set[str]]]:
    """``sources_of`` for :func:`assign` from a lexical table: per target id, the source
    words whose ``best`` most probable translations hold it."""
    targets = np.asarray(lexicon.targets)[:, :best]

    def sources_of(target_ids: Sequence[int]) -> list[set[str]]:
        out = []
        for target in target_ids:
            rows = np.nonzero((targets == int(target)).any(axis=1))[0]
            out.append({source_vocabulary.tokens[int(r)] for r in rows})
        return out

    return sources_of


def padded_arrays(constraints: Sequence[SentenceConstraints | None]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The search's ``include_ids``, ``avoid_ids`` [B, phrases, tokens] and
    ``prefix_ids`` [B, tokens] of a batch, PAD-padded (each axis at least one wide)."""
    rows = [c or SentenceConstraints() for c in constraints]

    def phrases(get) -> np.ndarray:
        count = max([1] + [len(get(r)) for r in rows])
        width = max([1] + [len(p.ids) for r in rows for p in get(r)])
        out = np.zeros((len(rows), count, width), np.int32)
        for b, r in enumerate(rows):
            for n, p in enumerate(get(r)):
                out[b, n, : len(p.ids)] = p.ids
        return out

    width = max([1] + [len(r.prefix.ids) for r in rows])
    prefix = np.zeros((len(rows), width), np.int32)
    for b, r in enumerate(rows):
        prefix[b, : len(r.prefix.ids)] = r.prefix.ids
    return phrases(lambda r: r.include), phrases(lambda r: r.avoid), prefix


def phrase_ends(tokens: Sequence[str], constraints: SentenceConstraints) -> list[int | None]:
    """Per phrase to include, the position in ``tokens`` (an output as searched, its
    ``<unk>`` unfilled) just past its first complete match, or None: the search's own
    rule (:func:`keras_nmt.search.constrained.advance`, its graph twin), every partial
    match at once, an ``<unk>`` advancing only the first unmet phrase whose match it
    continues and none within the prefix. Cost: O(len(tokens) * phrase tokens)."""
    patterns = [[UNK if i == UNK_ID else t for t, i in zip(p.tokens, p.ids)]
                for p in constraints.include]
    partial = [{0} for _ in patterns]
    ends: list[int | None] = [None] * len(patterns)
    in_prefix = len(constraints.prefix.ids)
    for n, token in enumerate(tokens):
        owner = None
        if token == UNK and n >= in_prefix:
            owner = next((k for k, (pattern, at) in enumerate(zip(patterns, partial))
                          if ends[k] is None and any(pattern[j] == UNK for j in at)), None)
        for k, pattern in enumerate(patterns):
            may = token != UNK or k == owner
            grown = {j + 1 for j in partial[k] if may and pattern[j] == token}
            if len(pattern) in grown and ends[k] is None:
                ends[k] = n + 1
            partial[k] = {0} | (grown - {len(pattern)})
    return ends


def read_output(tokens: Sequence[str], constraints: SentenceConstraints
                ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(``tokens`` with their placeholders filled, the phrases they miss) for an output as
    searched: the ``<unk>`` of the prefix and of each phrase's match (:func:`phrase_ends`)
    become the words they stand for (the module docstring); the phrases never matched,
    as text, and the glossary's terms there was no room for are unmet."""
    out = list(tokens)
    prefix = constraints.prefix
    for n, (token, i) in enumerate(zip(prefix.tokens, prefix.ids)):
        if i == UNK_ID and n < len(out) and out[n] == UNK:
            out[n] = token
    ends = phrase_ends(tokens, constraints)
    for phrase, end in zip(constraints.include, ends):
        if end is not None:
            out[end - len(phrase.tokens) : end] = phrase.tokens
    unmet = tuple(" ".join(p.tokens) for p, end in zip(constraints.include, ends) if end is None)
    return tuple(out), unmet + constraints.unplaced


def constrained_apart(apart: Callable | None = None) -> Callable:
    """:func:`keras_nmt.decoding.translation.translate_lines`' ``apart`` that also batches
    constrained sentences apart from the others: the plain ones keep the plain search,
    which costs what it did."""
    def key(item) -> tuple[bool, bool]:
        return bool(item.constraints), bool(apart(item)) if apart is not None else False

    return key


def empty_lines_unmet(lines: Sequence[str], per_line: Sequence[LineConstraints | None] | None,
                      translations: list) -> list:
    """``translations`` with an empty line's phrases to include listed as unmet: it is
    never decoded, and its empty output holds none of them."""
    if not per_line:
        return translations
    return [dataclasses.replace(t, unmet=tuple(found.include))
            if found and found.include and not line.strip() else t
            for line, found, t in zip(lines, per_line, translations)]
