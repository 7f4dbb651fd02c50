"""The Translator API: raw sentences in, detokenized translations out.

The training report, ``keras-nmt translate`` and ``keras-nmt evaluate`` all go through
this class, and Python users call it directly::

    translator = Translator.from_run_dir("runs/search50")
    translator.translate(["The man is here."], beam_size=5)

    # vocabulary selection: the 1,000 most frequent target words and the 20 best
    # translations of each source word (the run's lexical table, keras-nmt lexicon)
    translator.translate(lines, beam_size=5, shortlist=(1000, 20))

    # an ensemble of runs that share their vocabularies, 3-best lists, UNK replacement
    translator = Translator.from_run_dirs(["runs/a", "runs/b"])
    for t in translator.translate(lines, beam_size=5, nbest=3, unk_replace=True):
        for hypothesis in t.hypotheses:
            print(hypothesis.text, hypothesis.score)

A line of several sentences is split (:mod:`keras_nmt.text.sentences`) and each sentence is
translated alone, as the models were trained on single sentences; ``split_sentences=False``
translates each line whole. :func:`join_translations` says what the line's Translation is.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from keras_nmt import search
from keras_nmt.config import JIT_LENGTH_MULTIPLE, check_attention
from keras_nmt.constants import EOS, EOS_ID
from keras_nmt.ensemble import Ensemble, check_compatible
from keras_nmt.lexicon import shortlist_inputs
from keras_nmt.models import TranslationModel
from keras_nmt.rundir import RunDir
from keras_nmt.text.sentences import SplitLines, block_diagonal, join_texts, nbest_rows
from keras_nmt.unk_replace import load_dictionary, replace_unknowns

# The default maximum source length is max(MIN_SOURCE_LEN, SOURCE_LEN_FACTOR * max_len).
SOURCE_LEN_FACTOR = 2
MIN_SOURCE_LEN = 100


@dataclasses.dataclass(frozen=True)
class Translation:
    text: str  # detokenized
    tokens: tuple[str, ...]
    score: float  # length-normalised log-probability (0.0 for empty input)
    source_tokens: tuple[str, ...]  # the tokens translated (after truncation)
    attention: np.ndarray | None = None  # [output tokens + EOS, source tokens + EOS]
    # With translate(nbest=N > 1): the N best hypotheses, best first (the first is this
    # translation again); each has empty ``alternatives``. Empty with nbest=1.
    alternatives: tuple["Translation", ...] = ()
    truncated: int = 0  # source tokens dropped beyond Translator.max_source_len
    # A line split into several sentences: each sentence's translation, in order, which
    # the fields above join (join_translations); () for a line of one sentence.
    sentences: tuple["Translation", ...] = ()

    @property
    def hypotheses(self) -> tuple["Translation", ...]:
        """The n-best list: ``alternatives``, or just this translation when it is empty."""
        return self.alternatives or (self,)

    def attention_labels(self) -> tuple[list[str], list[str]]:
        """The labels of ``attention``'s rows and columns: each sentence's output tokens,
        then its source tokens, each followed by EOS (one sentence: tokens + EOS)."""
        parts = self.sentences or (self,)
        return ([token for part in parts for token in (*part.tokens, EOS)],
                [token for part in parts for token in (*part.source_tokens, EOS)])


def join_translations(parts: Sequence[Translation]) -> Translation:
    """The Translation of a line from those of its sentences (:mod:`keras_nmt.text.sentences`):
    ``text`` the sentences' texts one space apart (empty ones left out), ``tokens`` and
    ``source_tokens`` concatenated, ``score`` and ``truncated`` summed, ``attention`` the
    block-diagonal matrix of the sentences' (rows: each sentence's output tokens + EOS,
    columns: its source tokens + EOS, in order; :meth:`Translation.attention_labels`),
    ``sentences`` the parts. With n-best lists, hypothesis k joins hypothesis k of each
    sentence (its best when it has fewer). One sentence: its own Translation."""
    if len(parts) == 1:
        return parts[0]

    def joined(hypotheses: tuple[Translation, ...]) -> Translation:
        matrices = [h.attention for h in hypotheses if h.attention is not None]
        return Translation(
            join_texts([h.text for h in hypotheses]),
            tuple(token for h in hypotheses for token in h.tokens),
            float(sum(h.score for h in hypotheses)),
            tuple(token for h in hypotheses for token in h.source_tokens),
            block_diagonal(matrices) if matrices else None,
            truncated=sum(h.truncated for h in hypotheses),
            sentences=hypotheses,
        )

    rows = nbest_rows([part.hypotheses for part in parts])
    best = joined(rows[0])
    if any(part.alternatives for part in parts):
        best = dataclasses.replace(best, alternatives=tuple(joined(row) for row in rows))
    return best


def default_max_source_len(max_len: int) -> int:
    """``max(100, 2 * max_len)``: twice the longest training sentence, never under 100."""
    return max(MIN_SOURCE_LEN, SOURCE_LEN_FACTOR * int(max_len))


class Translator:
    """Translates raw sentences with a :class:`TranslationModel` or an :class:`Ensemble`.

    ``max_source_len`` is the most source tokens (EOS not counted) a sentence may have;
    longer sentences are cut to their first ``max_source_len`` tokens before decoding,
    and their Translation says how many tokens were dropped (``truncated``). It bounds
    the decoding time and memory (the attention history grows with source x target
    length) of a runaway input line. Default: ``max(100, 2 * config.max_len)``, twice
    the longest training sentence but never under 100 tokens (100 for search30/search50).
    It is a plain attribute: changing it affects the next :meth:`translate` call.

    Decoding runs in one ``tf.function`` per ``nbest`` value, traced once for all batch
    shapes, without autograph: the model's ``encode`` and ``step`` (a TranslationModel,
    an Ensemble, any object with that interface) must not branch in Python on tensors.
    """

    def __init__(
        self,
        model: TranslationModel | Ensemble,
        source_codec,
        target_codec,
        max_source_len: int | None = None,
        jit_compile: bool = False,
        lexicon=None,
    ):
        self.model = model
        # A keras_nmt.lexicon.Lexicon, for translate(shortlist=...); None: no selection.
        self.lexicon = lexicon
        self.jit_compile = jit_compile  # XLA-compile the beam search
        # How text becomes ids and back (keras_nmt.text codecs: words or SentencePiece).
        self.source_codec = source_codec
        self.target_codec = target_codec
        if max_source_len is None:
            max_source_len = default_max_source_len(model.config.max_len)
        if (
            isinstance(max_source_len, bool)
            or int(max_source_len) != max_source_len
            or max_source_len < 1
        ):
            raise ValueError(f"max_source_len must be a positive integer, got {max_source_len!r}")
        self.max_source_len = int(max_source_len)
        # (nbest, with a shortlist) -> tf.function, traced once
        self._search_fns: dict[tuple[int, bool], Callable] = {}

    source_vocab = property(lambda self: self.source_codec.vocabulary)
    target_vocab = property(lambda self: self.target_codec.vocabulary)
    src_lang = property(lambda self: self.source_codec.lang)
    tgt_lang = property(lambda self: self.target_codec.lang)

    @classmethod
    def from_run_dir(
        cls, path: str | os.PathLike, weights: str = "best", max_source_len: int | None = None,
        precision: str | None = None,
    ) -> "Translator":
        """Load a run directory's model; ``weights`` is "best" (falling back to the last
        checkpoint when no best one was kept), "last" or "averaged" (``averaged/``).

        Raises :class:`~keras_nmt.rundir.RunDirError` for a missing or unusable directory
        (no config, no checkpoint, unreadable weights)."""
        return cls.from_run_dirs([path], weights=weights, max_source_len=max_source_len,
                                 precision=precision)

    @classmethod
    def from_run_dirs(
        cls,
        paths: Sequence[str | os.PathLike],
        weights: str = "best",
        max_source_len: int | None = None,
        precision: str | None = None,
    ) -> "Translator":
        """One run directory: its model; several: an :class:`Ensemble` of their models.
        Each computes in its run's precision, or in ``precision`` when given.

        The runs must translate the same language pair with identical vocabularies
        (:class:`~keras_nmt.ensemble.EnsembleError` otherwise, naming the two runs).
        Every directory is checked before any weights are loaded."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        runs = [RunDir(path).inspect(weights) for path in paths]
        check_compatible(runs)
        # Members share their vocabularies, so the first run's lexical table serves all.
        lexicon = runs[0].run.load_lexicon() if runs[0].run.lexicon_path.is_file() else None
        models = [run.run.load_model(files=run, precision=precision) for run in runs]
        model = models[0] if len(models) == 1 else Ensemble(models)
        return cls(model, runs[0].source_codec, runs[0].target_codec,
                   max_source_len=max_source_len, lexicon=lexicon)

    def _search_fn(self, nbest: int, selecting: bool = False, attention: bool = True) -> Callable:
        key = (nbest, selecting, attention)
        if key not in self._search_fns:
            # search.beam_search is plain TensorFlow ops (no Python control flow on
            # tensors), so autograph is not needed: tracing without it is ~3x faster.
            # Without a shortlist, a function without the table: the exact search.
            self._search_fns[key] = search.make_translate_fn(
                self.model, nbest=nbest, autograph=False, jit_compile=self.jit_compile,
                lexicon_table=self.lexicon.targets if selecting else None,
                attention=attention,
            )
        return self._search_fns[key]

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        """Source ids of each line, EOS appended (truncated to ``max_source_len`` tokens)."""
        return [
            self.source_vocab.encode(self._source_tokens(line)[0]) + [EOS_ID] for line in lines
        ]

    def _source_tokens(self, line: str) -> tuple[tuple[str, ...], int]:
        tokens = self.source_codec.tokenize(line)
        dropped = max(0, len(tokens) - self.max_source_len)
        return tuple(tokens[: self.max_source_len]), dropped

    def translate(
        self,
        lines: Sequence[str],
        beam_size: int = 5,
        alpha: float = 1.0,
        forbid_unk: bool = False,
        batch_size: int = 32,
        with_attention: bool = False,
        progress: Callable[[int], None] | None = None,
        nbest: int = 1,
        unk_replace: bool = False,
        dictionary: Mapping[str, str] | str | os.PathLike | None = None,
        shortlist: tuple[int, int] | None = None,
        split_sentences: bool = True,
    ) -> list[Translation]:
        """Translate ``lines``; the output has one Translation per line, in order.

        ``split_sentences``: each line is split into its sentences
        (:func:`keras_nmt.text.sentences.split_sentences`, the source language's rules),
        every sentence is translated alone, and the line's Translation joins theirs
        (:func:`join_translations`); a line of one sentence gives the Translation it gives
        unsplit. False: each line is translated whole, as one sentence.

        Sentences are decoded in batches of similar length (less padding); an empty
        or whitespace-only line translates to an empty string (score 0.0). A sentence
        longer than ``max_source_len`` tokens is truncated (see the class docstring).

        ``nbest`` > 1 (at most ``beam_size``) fills each Translation's ``alternatives``
        with up to ``nbest`` hypotheses sorted by score, best first; fewer when fewer
        distinct outputs exist. The Translation itself is always the best one.

        ``unk_replace`` replaces every generated ``<unk>`` by the source word with the
        highest attention weight at that step, mapped through ``dictionary`` (a mapping
        or a ``source<TAB>target`` file) when it has the word; see
        :mod:`keras_nmt.unk_replace`. ``tokens`` and ``text`` hold the replaced words.
        Attention is computed for it in any case; ``attention`` is only kept with
        ``with_attention``.

        ``shortlist`` = (F, B): vocabulary selection, each batch scored on the F most
        frequent target words, the B best translations of its source words by the
        lexical table and the reserved words (:class:`keras_nmt.search.Shortlist`);
        scores are normalised over those words. None: the whole vocabulary.

        ``progress`` is called after each batch with the number of lines it finished (a
        line of several sentences is finished with its last one; empty lines, never
        decoded, are not counted).
        """
        _check_positive("beam_size", beam_size)
        _check_positive("nbest", nbest)
        _check_positive("batch_size", batch_size)
        if nbest > beam_size:
            raise ValueError(f"nbest ({nbest}) cannot exceed beam_size ({beam_size})")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        selection = shortlist_inputs(shortlist, self.lexicon) if shortlist else ()
        if isinstance(dictionary, (str, os.PathLike)):
            dictionary = load_dictionary(dictionary)
        if unk_replace:  # an Ensemble attends when one of its members does
            members = getattr(self.model, "models", [self.model])
            check_attention("unk_replace", [member.config for member in members])
        split = SplitLines(lines, self.src_lang, split_sentences)
        translated = self._decode(split.sentences, beam_size, alpha, forbid_unk, batch_size,
                                  with_attention, nbest, unk_replace, dictionary, selection,
                                  split.progress(progress))
        return split.join(translated, join_translations)

    def _decode(self, lines: list[str], beam_size: int, alpha: float, forbid_unk: bool,
                batch_size: int, with_attention: bool, nbest: int, unk_replace: bool,
                dictionary, selection, finished: Callable[[list[int]], None]
                ) -> list[Translation]:
        """One Translation per line of ``lines``, each translated as one sentence, in
        batches of similar length; ``finished`` hears the indices of each batch's lines."""
        need_attention = with_attention or unk_replace
        prepared = [self._source_tokens(line) for line in lines]
        source_tokens = [tokens for tokens, _ in prepared]
        ids = [self.source_vocab.encode(tokens) + [EOS_ID] for tokens in source_tokens]
        results: list[Translation | None] = [None] * len(lines)
        todo = []
        for i, (tokens, dropped) in enumerate(prepared):
            if tokens:
                todo.append(i)
            else:
                empty = Translation("", (), 0.0, ())
                if nbest > 1:
                    empty = dataclasses.replace(empty, alternatives=(empty,))
                results[i] = empty
        todo.sort(key=lambda i: len(ids[i]))
        translate_fn = self._search_fn(int(nbest), bool(selection), need_attention)
        for start in range(0, len(todo), batch_size):
            chosen = todo[start : start + batch_size]
            width = max(len(ids[i]) for i in chosen)
            rows = len(chosen)
            if self.jit_compile:
                # XLA compiles once per shape: full batches of whole blocks of positions.
                # Extra rows hold a lone EOS; their output is not read.
                width = -(-width // JIT_LENGTH_MULTIPLE) * JIT_LENGTH_MULTIPLE
                rows = batch_size
            batch = np.zeros((rows, width), np.int32)
            batch[len(chosen):, 0] = EOS_ID
            for row, i in enumerate(chosen):
                batch[row, : len(ids[i])] = ids[i]
            out = translate_fn(
                tf.constant(batch),
                tf.constant(beam_size, tf.int32),
                tf.constant(alpha, tf.float32),
                tf.constant(bool(forbid_unk)),
                tf.constant(0, tf.int32),
                *[tf.constant(value, tf.int32) for value in selection],
            )
            out_ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
            scores = out["scores"].numpy()
            attention = out["attention"].numpy() if need_attention else None
            for row, i in enumerate(chosen):
                hypotheses = []
                for n in range(lengths.shape[1]):
                    length = int(lengths[row, n])
                    if length == 0:  # an n-best slot no hypothesis filled
                        continue
                    tokens = tuple(self.target_vocab.decode(out_ids[row, n, :length]))
                    weights = None
                    if attention is not None:
                        weights = attention[row, n, :length, : len(ids[i])].copy()
                    if unk_replace:
                        tokens = replace_unknowns(tokens, source_tokens[i], weights, dictionary)
                    hypotheses.append(Translation(
                        self.target_codec.detokenize(tokens),
                        tokens,
                        float(scores[row, n]),
                        source_tokens[i],
                        weights if with_attention else None,
                        truncated=prepared[i][1],
                    ))
                best = hypotheses[0]
                if nbest > 1:
                    best = dataclasses.replace(best, alternatives=tuple(hypotheses))
                results[i] = best
            finished(chosen)
        return results  # type: ignore[return-value]


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
