"""The dictionary of a run's unknown words, for ``--unk-replace``
(:mod:`keras_nmt.decoding.unk_replace` fills each ``<unk>`` with its most attended source
word, looked up here): built from the run's own training split, written and read.

A source word's entry is its most probable translation by IBM Model 1
(:func:`keras_nmt.lexicon.table.train_model1`, over the table's sample, on every word the
tokenizer makes) among the target words the vocabulary lacks, when one is among its
:data:`BEST` most probable: a word training saw gets the translation training saw, and
only a word it never saw is copied. A run whose target vocabulary holds every training word
gets no dictionary.

The file: UTF-8, one ``source<TAB>target`` a line (the target may hold spaces), blank lines
skipped, fields stripped, the first entry of a source word wins. Cost: the lexical table's
(one reading pass, EM rounds over the sample) with tables of the sample's word types, and
8 bytes x :data:`BEST` per source word type kept.
"""

from __future__ import annotations

import contextlib
import pathlib
import dataclasses
import time
from typing import Mapping, Sequence

import numpy as np

from keras_nmt.core.constants import RESERVED, UNK_ID
from keras_nmt.corpus.readers import file_lines
from keras_nmt.core.errors import DictionaryError, InputError, RunDirError
from keras_nmt.lexicon.table import DEFAULT_ITERATIONS, TableLimits, train_model1
from keras_nmt.data.pair_sample import TokenizedPairs, sampled_training_pairs
from keras_nmt.core.progress import Progress
from keras_nmt.text import codecs

BEST = 10  # translations searched per source word for one the vocabulary lacks


def load_dictionary(path: str | pathlib.Path) -> dict[str, str]:
    """Read a ``source<TAB>target`` dictionary file into a dict (first entry wins)."""
    path = pathlib.Path(path)
    try:
        lines = list(file_lines(path))
    except FileNotFoundError:
        raise DictionaryError(f"dictionary file not found: {path}") from None
    except IsADirectoryError:
        raise DictionaryError(f"dictionary {path} is a directory, not a file") from None
    except InputError as error:
        raise DictionaryError(f"dictionary {error}") from None
    except OSError as error:
        raise DictionaryError(f"cannot read dictionary {path}: {error.strerror or error}") from None
    entries: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise DictionaryError(
                f"{path}, line {number}: expected 'source<TAB>target', got {shown!r}"
            )
        source, target = fields[0].strip(), fields[1].strip()
        entries.setdefault(source, target)
    return entries


def dictionary_text(entries: Mapping[str, str]) -> str:
    """``entries`` as a dictionary file's text (what :func:`load_dictionary` reads), one
    ``source<TAB>target`` line a word, sorted by source word."""
    return "".join(f"{source}\t{entries[source]}\n" for source in sorted(entries))


class OpenVocabulary:
    """An id for every token it is given, from the first id after the reserved ones (the
    lexical table's EM treats those as padding, BOS and EOS)."""

    def __init__(self):
        self.tokens: list[str] = list(RESERVED)
        self._ids: dict[str, int] = {token: i for i, token in enumerate(RESERVED)}

    def encode(self, tokens: Sequence[str]) -> list[int]:
        ids = self._ids
        out = []
        for token in tokens:
            found = ids.get(token)
            if found is None:
                found = ids[token] = len(self.tokens)
                self.tokens.append(token)
            out.append(found)
        return out

    def __len__(self) -> int:
        return len(self.tokens)


@dataclasses.dataclass(frozen=True)
class WordSample:
    """The lexical table's sample of a word run's training split, every word its own id
    (``words``, source and target side): read once, it serves the dictionary and, read
    through the vocabularies (:meth:`in_vocabularies`), the lexical table."""

    pairs: TokenizedPairs
    words: tuple[OpenVocabulary, OpenVocabulary]
    lines: int  # of the split
    sampled: int  # lines read

    @classmethod
    def if_needed(cls, run, limits: TableLimits = TableLimits(), progress: Progress | None = None,
                  what: str = "unknown-word dictionary and lexical table") -> "WordSample | None":
        """The sample of a run that gets a dictionary (a word run whose target vocabulary
        lacks training words); None for any other run, without reading it. ``what`` names
        the work in the progress line."""
        source_codec, target_codec = run.codecs()
        if source_codec.kind != codecs.WORD or _holds_every_target_word(run, target_codec.vocabulary):
            return None
        words = OpenVocabulary(), OpenVocabulary()
        pairs, lines, sampled = sampled_training_pairs(
            run, lambda line: words[0].encode(source_codec.tokenize(line)),
            lambda line: words[1].encode(target_codec.tokenize(line)),
            limits.sample_pairs, progress or Progress(enabled=False), what)
        return cls(pairs, words, lines, sampled)

    def in_vocabularies(self, source_vocab, target_vocab) -> tuple[TokenizedPairs, int, int]:
        """The sample as the vocabularies' ids (a word they lack: ``<unk>``), as
        :func:`keras_nmt.data.pair_sample.sampled_training_pairs` gives it for the lexical table."""
        lookups = [np.asarray(vocab.encode(words.tokens), np.int32)
                   for vocab, words in zip((source_vocab, target_vocab), self.words)]
        return self.pairs.mapped(*lookups), self.lines, self.sampled


@dataclasses.dataclass(frozen=True)
class UnknownWordDictionary:
    """``entries``: source word -> the translation to write for a ``<unk>`` that attended
    to it; ``info``: how it was built."""

    entries: dict[str, str]
    info: dict


def build_for_run(run, iterations: int = DEFAULT_ITERATIONS, progress: Progress | None = None,
                  limits: TableLimits = TableLimits(), sample: WordSample | None = None
                  ) -> UnknownWordDictionary | None:
    """The dictionary of a run directory (a :class:`~keras_nmt.rundir.run_directory.RunDir`), from the
    sample of its training split the lexical table reads (module docstring; ``sample``:
    that sample, when already read), and for a child its parent's entries that still hold
    (:func:`_with_parents_entries`). None for a SentencePiece run (its pieces spell every
    word) or a run whose target vocabulary lacks no word training or its parent saw."""
    started = time.perf_counter()
    dictionary = _with_parents_entries(
        run, _from_training(run, iterations, progress, limits, sample))
    if dictionary is not None:
        dictionary.info["seconds"] = time.perf_counter() - started
    return dictionary


def _with_parents_entries(run, own: UnknownWordDictionary | None
                          ) -> UnknownWordDictionary | None:
    """``own`` with, for a child (a run ``--init-from`` another), its parent's entries that
    still hold: a source word ``own`` has no entry for, whose translation the child's
    target vocabulary still lacks (the child writes ``<unk>`` for it as the parent did).
    A parent gone, or with no readable dictionary, adds nothing."""
    parent = run.parent_run()
    if parent is None:
        return own
    try:
        theirs = parent.load_dictionary() or {}
    except DictionaryError:
        theirs = {}
    known = run.codecs()[1].vocabulary
    entries = own.entries if own is not None else {}
    kept = {source: target for source, target in theirs.items()
            if source not in entries and target not in known}
    if not kept:
        return own
    info = dict(own.info) if own is not None else {
        "method": "the parent's entries that still hold (the child's training split lacks "
                  "no target word)"}
    info.update(entries=len(entries) + len(kept), parent_entries=len(kept))
    return UnknownWordDictionary({**kept, **entries}, info)


def _from_training(run, iterations: int, progress: Progress | None, limits: TableLimits,
                   sample: WordSample | None) -> UnknownWordDictionary | None:
    """The entries the run's own training sample gives (:func:`build_for_run`)."""
    progress = progress or Progress(enabled=False)
    sample = sample or WordSample.if_needed(run, limits, progress, "unknown-word dictionary")
    if sample is None:
        return None
    pairs, words, lines, sampled = sample.pairs, sample.words, sample.lines, sample.sampled
    target_codec = run.codecs()[1]
    # The target words of the pairs kept (a pair training drops had its words read too).
    known = target_codec.vocabulary
    unknown = np.zeros(len(words[1]), bool)
    present = np.unique(pairs.arrays()[1])
    unknown[present] = [words[1].tokens[i] not in known for i in present]
    if not unknown.any():
        return None
    table = train_model1(pairs, len(words[0]), len(words[1]), iterations, BEST, progress, limits)
    entries: dict[str, str] = {}
    for source_id in range(len(RESERVED), len(words[0])):
        for target_id in table.targets[source_id]:
            if target_id and unknown[target_id]:  # 0 pads a row of fewer translations
                entries[words[0].tokens[source_id]] = words[1].tokens[target_id]
                break
    info = {
        "method": "IBM Model 1 over every word of the sample; each source word's most "
                  "probable translation the target vocabulary lacks",
        "corpus_lines": lines, "sampled_lines": sampled, "pairs": len(pairs),
        "source_words": len(words[0]) - len(RESERVED),
        "target_words": len(words[1]) - len(RESERVED),
        "target_words_unknown": int(unknown.sum()),
        "entries": len(entries), "iterations": iterations, "best": BEST,
    }
    return UnknownWordDictionary(entries, info)


def _holds_every_target_word(run, vocabulary) -> bool:
    """Whether the prepared split says that training never wrote a target ``<unk>`` (one
    streamed pass over its ids, instead of tokenizing the sample to find no word
    missing). False when the split is gone: the sample decides then."""
    try:
        split = run.prepared_split(needed_for="the unknown-word dictionary")
    except RunDirError:
        return False
    if split is None:
        return False
    with contextlib.closing(split):
        return int(split.token_counts(1, len(vocabulary))[UNK_ID]) == 0


def write_for_run(run, iterations: int = DEFAULT_ITERATIONS, progress: Progress | None = None,
                  limits: TableLimits = TableLimits(), sample: WordSample | None = None
                  ) -> UnknownWordDictionary | None:
    """:func:`build_for_run`, stored in the run's ``dictionary.tsv`` (an older one is
    removed when the run gets none)."""
    dictionary = build_for_run(run, iterations, progress, limits, sample)
    run.write_dictionary(None if dictionary is None else dictionary.entries)
    return dictionary
