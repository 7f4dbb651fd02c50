"""The Translator API: raw sentences in, detokenized translations out (:class:`Translator`).

The training report, ``keras-nmt translate`` and ``keras-nmt evaluate`` go through it::

    translator = Translator.from_run_dir("runs/search50")  # from_run_dirs: an ensemble
    translator.translate(lines, beam_size=5, shortlist=(1000, 20), nbest=3, confidence=True)

Options: vocabulary selection from the run's lexical table, an ensemble of runs that share
their vocabularies, n-best lists, UNK replacement, constraints and glossaries
(:mod:`keras_nmt.decoding.constraints`), confidence (:mod:`keras_nmt.decoding.confidence`).
A line of several sentences is split (:mod:`keras_nmt.text.sentences`) and each sentence
translated alone (``split_sentences=False``: lines whole). The onnxruntime path shares this
loop (:func:`~keras_nmt.decoding.translation.join_translations` makes a line's Translation).
Cost: one beam search per batch, growing with sentences x beam x output length x members.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from keras_nmt import search
from keras_nmt.core.config import JIT_LENGTH_MULTIPLE, check_attention
from keras_nmt.core.constants import EOS_ID
from keras_nmt.decoding.constraints import (
    Encoder, Glossary, LineConstraints, attach, check_aligned, constrained_apart,
    empty_lines_unmet, lexicon_sources, max_output_tokens, padded_arrays,
)
from keras_nmt.decoding.ensemble import Ensemble, check_compatible
from keras_nmt.evaluation.forced import check_dropout, dropout_logprobs
from keras_nmt.lexicon.table import shortlist_inputs
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.decoding.translation import (
    Source, Translation, beam_translation, blank, rare_source, read_source, translate_lines,
    unk_rewrite,
)
from keras_nmt.lexicon.unk_dictionary import load_dictionary
from keras_nmt.decoding.unk_replace import on_by_default

# The default maximum source length is max(MIN_SOURCE_LEN, SOURCE_LEN_FACTOR * max_len).
SOURCE_LEN_FACTOR = 2
MIN_SOURCE_LEN = 100


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
        unk_replace: bool = False,
        dictionary: Mapping[str, str] | None = None,
    ):
        self.model = model
        # What translate(unk_replace=None) does, and the dictionary it fills <unk> from
        # when given none: from_run_dirs sets the runs' own (keras_nmt.decoding.unk_replace.on_by_default,
        # dictionary.tsv), as `keras-nmt translate` and the exports do.
        self.unk_replace = bool(unk_replace)
        self.dictionary = dictionary
        # A keras_nmt.lexicon.table.Lexicon, for translate(shortlist=...); None: no selection.
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
        cls, path: str | os.PathLike, weights: str = "reported", max_source_len: int | None = None,
        precision: str | None = None,
    ) -> "Translator":
        """Load a run directory's model; ``weights`` is "reported" (those the run's report
        used: the averaged ones for a run that averages, else the best), "best" (falling
        back to the last checkpoint when no best one was kept), "last" or "averaged"
        (``averaged/``).

        Raises :class:`~keras_nmt.core.errors.RunDirError` for a missing or unusable directory
        (no config, no checkpoint, unreadable weights)."""
        return cls.from_run_dirs([path], weights=weights, max_source_len=max_source_len,
                                 precision=precision)

    @classmethod
    def from_run_dirs(
        cls,
        paths: Sequence[str | os.PathLike],
        weights: str = "reported",
        max_source_len: int | None = None,
        precision: str | None = None,
    ) -> "Translator":
        """One run directory: its model; several: an :class:`Ensemble` of their models.
        Each computes in its run's precision, or in ``precision`` when given. A word run
        of RNNsearch trained with ``vocab_min_count`` above 1 replaces ``<unk>`` by default,
        through the first run's ``dictionary.tsv`` (:meth:`translate`'s ``unk_replace``).

        The runs must translate the same language pair with identical vocabularies
        (:class:`~keras_nmt.core.errors.EnsembleError` otherwise, naming the two runs).
        Every directory is checked before any weights are loaded."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        runs = [RunDir(path).inspect(weights) for path in paths]
        check_compatible(runs)
        # Members share their vocabularies, so the first run's lexical table serves all.
        lexicon = runs[0].run.load_lexicon() if runs[0].run.lexicon_path.is_file() else None
        models = [run.run.load_model(files=run, precision=precision) for run in runs]
        model = models[0] if len(models) == 1 else Ensemble(models)
        replace = all(on_by_default(run.config, run.source_codec.kind) for run in runs)
        return cls(model, runs[0].source_codec, runs[0].target_codec,
                   max_source_len=max_source_len, lexicon=lexicon, unk_replace=replace,
                   dictionary=runs[0].run.load_dictionary() if replace else None)

    def _search_fn(self, nbest: int, selecting: bool = False, attention: bool = True,
                   constrained: bool = False, token_logprobs: bool = False) -> Callable:
        key = (nbest, selecting, attention, constrained, token_logprobs)
        if key not in self._search_fns:
            # search.beam_search is plain TensorFlow ops (no Python control flow on
            # tensors), so autograph is not needed: tracing without it is ~3x faster.
            # Without a shortlist, a function without the table: the exact search.
            self._search_fns[key] = search.make_translate_fn(
                self.model, nbest=nbest, autograph=False, jit_compile=self.jit_compile,
                lexicon_table=self.lexicon.selection_table() if selecting else None,
                attention=attention, constrained=constrained, token_logprobs=token_logprobs,
            )
        return self._search_fns[key]

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        """Source ids of each line, EOS appended (truncated to ``max_source_len`` tokens)."""
        return [list(self.source(line).ids) for line in lines]

    def source(self, sentence: str) -> Source:
        """A sentence's tokens and ids, cut to ``max_source_len`` tokens."""
        return read_source(self.source_codec, self.max_source_len, sentence)

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
        unk_replace: bool | None = None,
        dictionary: Mapping[str, str] | str | os.PathLike | None = None,
        shortlist: tuple[int, int] | None = None,
        split_sentences: bool = True,
        confidence: bool = False,
        constraints: Sequence[LineConstraints | None] | None = None,
        glossary: Glossary | None = None,
        dropout_samples: int = 0,
    ) -> list[Translation]:
        """Translate ``lines``; the output has one Translation per line, in order.

        ``split_sentences``: each line is split into its sentences
        (:func:`keras_nmt.text.sentences.split_sentences`, the source language's rules),
        every sentence is translated alone, and the line's Translation joins theirs
        (:func:`keras_nmt.decoding.translation.join_translations`); a line of one sentence gives the
        Translation it gives unsplit. False: each line is translated whole, as one sentence.

        Sentences are decoded in batches of similar length (less padding); an empty
        or whitespace-only line translates to an empty string (score 0.0). A sentence
        longer than ``max_source_len`` tokens is truncated (see the class docstring).

        ``nbest`` > 1 (at most ``beam_size``) fills each Translation's ``alternatives``
        with up to ``nbest`` hypotheses sorted by score, best first; fewer when fewer
        distinct outputs exist. The Translation itself is always the best one.

        ``unk_replace`` replaces every generated ``<unk>`` by the source word with the
        highest attention weight at that step, mapped through ``dictionary`` (a mapping
        or a ``source<TAB>target`` file; an empty one copies every word) when it has the
        word; see :mod:`keras_nmt.decoding.unk_replace`. ``tokens`` and ``text`` hold the replaced
        words. None (both): the translator's own, ``self.unk_replace`` and
        ``self.dictionary`` (a run's, with :meth:`from_run_dirs`).
        Attention is computed for it in any case; ``attention`` is only kept with
        ``with_attention``.

        ``shortlist`` = (F, B): vocabulary selection, each batch scored on the F most
        frequent target words, the B best translations of its source words by the
        lexical table and the reserved words (:class:`keras_nmt.search.Shortlist`);
        scores are normalised over those words. A sentence with a source word training
        saw at most :data:`~keras_nmt.lexicon.table.RARE_COUNT` times is decoded over the whole
        vocabulary, in a batch of such sentences. None: the whole vocabulary.

        ``confidence``: each Translation's ``confidence`` says how sure the model is of
        it (:mod:`keras_nmt.decoding.confidence`), from the log-probabilities the search gave its
        tokens (the search then keeps them, a history of one float per token: no second
        pass); each alternative of the n-best list has its own. ``dropout_samples`` N > 0:
        from the mean of each token's log-probability over N force-decoding passes of
        each hypothesis with the model's dropout on (Monte Carlo dropout: N more passes,
        and figures that vary with the masks drawn; a run trained with dropout only).

        ``constraints``: per line (aligned with ``lines``; None: none), phrases its
        translation must include and avoid, and a prefix it must start with;
        ``glossary``: source term -> target term pairs, a term a phrase to include of
        every line whose source holds its source term (:mod:`keras_nmt.decoding.constraints`
        says how both are tokenized, placed in a line's sentences and checked: a bad one
        raises :class:`~keras_nmt.core.errors.ConstraintError`). Constrained sentences decode
        in batches of their own by the constrained search
        (:mod:`keras_nmt.search.constrained`); a Translation's ``unmet`` lists the phrases
        its length limit kept out.

        ``progress`` is called after each batch with the number of lines it finished (a
        line of several sentences is finished with its last one; empty lines, never
        decoded, are not counted).
        """
        _check_positive("beam_size", beam_size)
        _check_positive("nbest", nbest)
        _check_positive("batch_size", batch_size)
        if nbest > beam_size:
            raise ValueError(f"nbest ({nbest}) cannot exceed beam_size ({beam_size})")
        if dropout_samples:
            _check_positive("dropout_samples", dropout_samples)
            if not confidence:
                raise ValueError("dropout_samples is a way to compute the confidence: "
                                 "ask for confidence=True too")
            check_dropout(self.model)
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        selection = shortlist_inputs(shortlist, self.lexicon) if shortlist else ()
        unk_replace = self.unk_replace if unk_replace is None else bool(unk_replace)
        if dictionary is None:
            dictionary = self.dictionary
        elif isinstance(dictionary, (str, os.PathLike)):
            dictionary = load_dictionary(dictionary)
        if unk_replace:  # an Ensemble attends when one of its members does
            members = getattr(self.model, "models", [self.model])
            check_attention("unk_replace", [member.config for member in members])
        need_attention = with_attention or unk_replace
        check_aligned(lines, constraints)
        constrain = (self.constraint_attacher(constraints, glossary)
                     if constraints is not None or glossary is not None else None)

        def decode(sources: list[Source]) -> list[Translation]:
            constrained = any(source.constraints for source in sources)
            translate_fn = self._search_fn(int(nbest), bool(selection), need_attention,
                                           constrained, confidence)
            batch = self._batch(sources, batch_size)
            # A row a batch row: under jit the batch is padded to batch_size rows.
            rules = (padded_arrays([s.constraints for s in sources]
                                   + [None] * (len(batch) - len(sources)))
                     if constrained else ())
            out = translate_fn(
                tf.constant(batch),
                tf.constant(beam_size, tf.int32),
                tf.constant(alpha, tf.float32),
                tf.constant(bool(forbid_unk)),
                tf.constant(0, tf.int32),
                *[tf.constant(value, tf.int32) for value in selection],
                *[tf.constant(value) for value in rules],
            )
            ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
            scores = out["scores"].numpy()
            attention = out["attention"].numpy() if need_attention else None
            logprobs = out["token_logprobs"].numpy() if confidence else None
            if dropout_samples:
                self._sample_dropout(sources, ids, lengths[:, :nbest], logprobs,
                                     dropout_samples, batch_size)
            return [
                beam_translation(
                    self.target_codec, source, ids[row], lengths[row], scores[row], nbest,
                    None if attention is None else attention[row], with_attention,
                    unk_rewrite(source, dictionary) if unk_replace else None,
                    None if logprobs is None else logprobs[row],
                )
                for row, source in enumerate(sources)
            ]

        return empty_lines_unmet(lines, constraints, translate_lines(
            lines, decode, batch_size, read=self.source, skip_empty=blank(nbest),
            lang=self.src_lang, split_sentences=split_sentences, target_lang=self.tgt_lang,
            progress=progress, constrain=constrain,
            apart=constrained_apart(
                self.rare_source() if selection and any(selection) else None)))

    def _sample_dropout(self, sources: list[Source], ids: np.ndarray, lengths: np.ndarray,
                        logprobs: np.ndarray, samples: int, batch_size: int) -> None:
        """The token log-probabilities in ``logprobs`` [B, slots, T] of each hypothesis
        ``lengths`` [B, n] counts (the first n slots: those kept) become their mean over
        ``samples`` dropout passes (:func:`dropout_logprobs`)."""
        where = [(row, slot) for row in range(len(sources))
                 for slot in range(lengths.shape[1]) if lengths[row, slot] > 0]
        means = dropout_logprobs(
            self.model, [sources[row].ids for row, _ in where],
            [ids[row, slot, : lengths[row, slot]] for row, slot in where], samples,
            batch_size * lengths.shape[1])
        for (row, slot), mean in zip(where, means):
            logprobs[row, slot, : len(mean)] = mean

    def constraint_encoder(self) -> Encoder:
        """Checks and encodes constraints as this translator decodes them: its target
        codec, and its longest output (its maximum source length, the model's decode
        ratio)."""
        return Encoder(self.target_codec, max_output_tokens(
            self.max_source_len, self.model.config.max_decode_ratio))

    def constraint_attacher(self, constraints, glossary=None) -> Callable:
        """:func:`keras_nmt.decoding.constraints.attach` with this translator's codecs, longest
        output and, for placing a bare phrase in a line's sentences, its lexical table."""
        sources_of = (None if self.lexicon is None else
                      lexicon_sources(self.lexicon, self.source_vocab))
        return attach(constraints, self.constraint_encoder(),
                                   self.source_codec.tokenize, glossary, sources_of)

    def rare_source(self) -> Callable[[Source], bool] | None:
        """Whether a sentence holds a source word training saw too rarely for vocabulary
        selection (:meth:`keras_nmt.lexicon.table.Lexicon.rare_sources`): such sentences decode
        over the whole vocabulary, in batches of their own. None without a table."""
        return None if self.lexicon is None else rare_source(self.lexicon.rare_sources())

    def _batch(self, sources: list[Source], batch_size: int) -> np.ndarray:
        """The sources' ids as one zero-padded int32 batch."""
        width = max(len(source.ids) for source in sources)
        rows = len(sources)
        if self.jit_compile:
            # XLA compiles once per shape: full batches of whole blocks of positions.
            # Extra rows hold a lone EOS; their output is not read.
            width = -(-width // JIT_LENGTH_MULTIPLE) * JIT_LENGTH_MULTIPLE
            rows = batch_size
        batch = np.zeros((rows, width), np.int32)
        batch[len(sources):, 0] = EOS_ID
        for row, source in enumerate(sources):
            batch[row, : len(source.ids)] = source.ids
        return batch


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
