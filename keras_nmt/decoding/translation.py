"""A translation, whichever path computed it, and the loop every translator runs around
its decoder.

:class:`Translation` is what :class:`keras_nmt.decoding.keras_translator.Translator` (Keras),
:class:`keras_nmt.decoding.onnx_translator.OnnxTranslator` (onnxruntime) and
:class:`keras_nmt.serving.client.TFServingClient` (a running TF Serving) give
for each line. :func:`translate_lines` is their one front end: each line split into its
sentences, the sentences decoded in batches of similar length by the backend's callable,
each line's translation joined from its sentences' (:func:`join_translations`), the
progress counted in lines. The backends differ only in how they decode a batch.

No TensorFlow here: the onnxruntime path, which must run without it, imports this module.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Mapping, Sequence, TypeVar

import numpy as np

from keras_nmt.decoding.confidence import Confidence, codec_confidence, join_confidences
from keras_nmt.decoding.constraints import SentenceConstraints, read_output
from keras_nmt.core.constants import EOS, EOS_ID
from keras_nmt.evaluation.forced import ForcedPair, join_pairs
from keras_nmt.text import line_join, sentences as sentence_rules
from keras_nmt.decoding.unk_replace import replace_unknowns

Item = TypeVar("Item")


@dataclasses.dataclass(frozen=True)
class _Deferred:
    """The value of a :class:`Translation` field computed when it is first read:
    ``compute(*args)`` (module-level, so that a Translation still pickles)."""

    compute: Callable
    args: tuple


class _ComputedOnRead:
    """A :class:`Translation` field that may hold a :class:`_Deferred`: the first read
    computes the value and keeps it, so later reads, ``==`` and ``repr`` see a plain value."""

    def __set_name__(self, owner, name: str) -> None:
        self.key = f"_{name}"

    def __get__(self, instance, owner=None):
        if instance is None:
            return None  # the field's default
        value = instance.__dict__[self.key]
        if isinstance(value, _Deferred):
            value = value.compute(*value.args)
            instance.__dict__[self.key] = value
        return value

    def __set__(self, instance, value) -> None:
        instance.__dict__[self.key] = value


@dataclasses.dataclass(frozen=True)
class Translation:
    """One line's translation (fields below). A line split into several sentences joins
    theirs (:func:`join_translations`); its ``attention`` and ``alignment`` are computed
    when first read. Each is dense, (sum of the sentences' rows) x (sum of their columns)
    cells, so a long line's costs far more than its sentences' own: read
    ``sentences[i].attention`` / ``sentences[i].alignment`` for one sentence at a time.
    ``dataclasses.replace`` reads every field, so it computes them too."""

    text: str  # detokenized
    # The output tokens; () from TF Serving, whose exports answer with text only.
    tokens: tuple[str, ...] = ()
    # Length-normalised log-probability: 0.0 for an empty line, None from a TF Serving
    # model without a scores output. A line of several sentences: the mean of theirs
    # weighted by their source lengths (keras_nmt.text.line_join.line_nbest).
    score: float | None = 0.0
    source_tokens: tuple[str, ...] = ()  # the tokens translated (after truncation)
    # [output tokens + EOS, source tokens + EOS]
    attention: np.ndarray | None = _ComputedOnRead()  # type: ignore[assignment]
    # With nbest=N > 1: the N best hypotheses, best first (the first is this translation
    # again); each has empty ``alternatives``. Empty with nbest=1.
    alternatives: tuple["Translation", ...] = ()
    truncated: int = 0  # source tokens dropped beyond the maximum source length
    # A line split into several sentences: each sentence's translation, in order, which
    # the fields above join (join_translations); () for a line of one sentence.
    sentences: tuple["Translation", ...] = ()
    # The onnxruntime path's translate(..., align=True): the best hypothesis
    # force-decoded against the (cut) source; None for an empty line. A line of several
    # sentences: their pairs joined (keras_nmt.evaluation.forced.join_pairs).
    alignment: ForcedPair | None = _ComputedOnRead()  # type: ignore[assignment]
    # translate(..., confidence=True): the model's confidence in the best hypothesis
    # (keras_nmt.decoding.confidence); None when not asked, and for an empty line. A line of
    # several sentences: theirs joined (keras_nmt.decoding.confidence.join_confidences).
    confidence: Confidence | None = None
    # With constraints: the phrases to include that the output lacks (only when its
    # length limit came first, or for an empty line), as text; () when all were met.
    unmet: tuple[str, ...] = ()

    @property
    def hypotheses(self) -> tuple["Translation", ...]:
        """The n-best list: ``alternatives``, or just this translation when it is empty."""
        return self.alternatives or (self,)

    @property
    def truncated_sentences(self) -> int:
        """How many of the line's sentences were cut to the maximum source length."""
        return sum(part.truncated > 0 for part in self.sentences or (self,))

    def attention_labels(self) -> tuple[list[str], list[str]]:
        """The labels of ``attention``'s rows and columns: each sentence's output tokens,
        then its source tokens, each followed by EOS (one sentence: tokens + EOS)."""
        parts = self.sentences or (self,)
        return ([token for part in parts for token in (*part.tokens, EOS)],
                [token for part in parts for token in (*part.source_tokens, EOS)])


def join_translations(parts: Sequence[Translation], lang: str = "") -> Translation:
    """The Translation of a line from those of its sentences (:mod:`keras_nmt.text.sentences`;
    the SavedModel's graph joins its outputs the same way): ``text`` the sentences' texts
    in the target language ``lang`` (one space apart, none in Chinese and Japanese; empty
    ones left out), ``tokens`` and ``source_tokens`` concatenated, ``truncated`` summed,
    ``score`` the mean of the sentences' scores weighted by their source tokens + EOS,
    ``attention`` the block-diagonal matrix of the sentences' (rows: each sentence's output
    tokens + EOS, columns: its source tokens + EOS, in order;
    :meth:`Translation.attention_labels`), ``alignment`` the sentences' pairs joined
    (:func:`~keras_nmt.evaluation.forced.join_pairs`), ``confidence`` the sentences'
    joined (:func:`~keras_nmt.decoding.confidence.join_confidences`), ``sentences`` the parts. Both
    matrices are computed when first read (:class:`Translation`).

    With n-best lists, the line's list holds the best combinations of one hypothesis per
    sentence, fewest unmet phrases first, then by that score
    (:func:`keras_nmt.text.line_join.line_nbest`), as many as the
    longest list; each one's ``sentences`` are the hypotheses it joins. One sentence: its
    own Translation."""
    if len(parts) == 1:
        return parts[0]
    lists = [part.hypotheses for part in parts]
    if any(h.score is None for found in lists for h in found):  # nothing to rank by
        combinations: list[tuple[float | None, tuple[int, ...]]] = [(None, (0,) * len(parts))]
    else:
        unmet = [[len(h.unmet) for h in found] for found in lists]
        combinations = line_join.line_nbest(  # type: ignore[assignment]
            [[h.score for h in found] for found in lists],
            [len(part.source_tokens) + 1 for part in parts], max(map(len, lists)),
            unmet if any(map(any, unmet)) else None)

    def joined(score: float | None, chosen: tuple[int, ...]) -> Translation:
        row = tuple(found[k] for found, k in zip(lists, chosen))
        return Translation(
            line_join.join_texts([h.text for h in row], lang),
            tuple(token for h in row for token in h.tokens),
            score,
            tuple(token for h in row for token in h.source_tokens),
            _joined_attention(row),
            truncated=sum(h.truncated for h in row),
            sentences=row,
            unmet=tuple(phrase for h in row for phrase in h.unmet),
        )

    hypotheses = [joined(score, chosen) for score, chosen in combinations]
    best = hypotheses[0]
    pairs = tuple(part.alignment for part in parts if part.alignment is not None)
    return Translation(
        best.text, best.tokens, best.score, best.source_tokens, _joined_attention(best.sentences),
        alternatives=tuple(hypotheses) if any(part.alternatives for part in parts) else (),
        truncated=best.truncated, sentences=tuple(parts),
        alignment=_Deferred(join_pairs, (pairs,)) if pairs else None,
        confidence=join_confidences([part.confidence for part in parts]),
        unmet=best.unmet,
    )


def _joined_attention(row: Sequence[Translation]) -> _Deferred | None:
    """The block-diagonal attention of the sentences ``row``, to compute when read."""
    matrices = tuple(h.attention for h in row if h.attention is not None)
    return _Deferred(line_join.block_diagonal, (matrices,)) if matrices else None


def ranked(hypotheses: Sequence[Translation], nbest: int) -> Translation:
    """The first (best) of ``hypotheses``, holding them all as its ``alternatives`` when
    ``nbest`` > 1."""
    best = hypotheses[0]
    return dataclasses.replace(best, alternatives=tuple(hypotheses)) if nbest > 1 else best


def blank(nbest: int) -> Translation:
    """The translation of a sentence without tokens, never decoded: "" scored 0.0."""
    return ranked([Translation("")], nbest)


@dataclasses.dataclass(frozen=True)
class Source:
    """A sentence as a model reads it (:func:`read_source`)."""

    tokens: tuple[str, ...]  # cut to the maximum source length
    ids: tuple[int, ...]  # the tokens' ids, then EOS
    truncated: int  # tokens cut off
    # What its output must respect (keras_nmt.decoding.constraints); None: nothing.
    constraints: SentenceConstraints | None = None

    def __len__(self) -> int:
        return len(self.tokens)


def read_source(codec, max_source_len: int, sentence: str) -> Source:
    """``sentence`` tokenized by ``codec`` (a :mod:`keras_nmt.text` codec) and cut to its
    first ``max_source_len`` tokens, as every path cuts it."""
    tokens = codec.tokenize(sentence)
    kept = tuple(tokens[:max_source_len])
    return Source(kept, (*codec.vocabulary.encode(kept), EOS_ID), len(tokens) - len(kept))


def beam_translation(
    codec, source: Source, ids: np.ndarray, lengths: np.ndarray, scores: np.ndarray,
    nbest: int, attention: np.ndarray | None = None, keep_attention: bool = False,
    rewrite: Callable[[tuple[str, ...], np.ndarray | None], tuple[str, ...]] | None = None,
    token_logprobs: np.ndarray | None = None,
) -> Translation:
    """The Translation of ``source`` from its row of a beam search's outputs (the graph
    the Keras and onnxruntime paths both run): ``ids`` [slots, T], ``lengths`` [slots]
    (EOS included; 0 for a slot no hypothesis filled), ``scores`` [slots] and
    ``attention`` [slots, T, S] or None, of which the first ``nbest`` slots count
    (:func:`ranked`). ``codec`` is the target side's. ``rewrite(tokens, weights)`` may
    change a hypothesis's tokens (UNK replacement); ``keep_attention`` keeps its weights.
    With ``source.constraints``, the ``<unk>`` standing for their words outside the
    vocabulary are filled first, and each hypothesis says which phrases it lacks.
    ``token_logprobs`` [slots, T] (the search's, EOS's included): each hypothesis gets
    its ``confidence`` (:func:`keras_nmt.decoding.confidence.codec_confidence`; none for a sentence
    without tokens, whose search was not its own)."""
    constraints = source.constraints
    hypotheses = []
    for n in range(min(nbest, len(lengths))):
        length = int(lengths[n])
        if length == 0:
            continue
        tokens = tuple(codec.vocabulary.decode(ids[n, :length]))
        weights = None if attention is None else attention[n, :length, : len(source.ids)].copy()
        unmet: tuple[str, ...] = ()
        if constraints is not None:
            tokens, unmet = read_output(tokens, constraints)
        if rewrite is not None:
            tokens = rewrite(tokens, weights)
        hypotheses.append(Translation(
            codec.detokenize(tokens), tokens, float(scores[n]), source.tokens,
            weights if keep_attention else None, truncated=source.truncated,
            unmet=unmet,
            confidence=(codec_confidence(token_logprobs[n, :length], tokens, codec)
                        if token_logprobs is not None and source.tokens else None),
        ))
    return ranked(hypotheses, nbest)


def unk_rewrite(source: Source, dictionary: Mapping[str, str] | None
                ) -> Callable[[tuple[str, ...], np.ndarray | None], tuple[str, ...]]:
    """:func:`beam_translation`'s ``rewrite`` that replaces each ``<unk>`` of a hypothesis
    by its most attended word of ``source``, through ``dictionary``
    (:func:`keras_nmt.decoding.unk_replace.replace_unknowns`): the Keras and onnxruntime paths'."""
    def rewrite(tokens: tuple[str, ...], weights: np.ndarray | None) -> tuple[str, ...]:
        return replace_unknowns(tokens, source.tokens, weights, dictionary)

    return rewrite


def translate_lines(
    lines: Sequence[str],
    decode: Callable[[list[Item]], Sequence[Translation]],
    batch_size: int,
    *,
    read: Callable[[str], Item] = str,
    skip_empty: Translation | None = None,
    lang: str = "",
    split_sentences: bool = False,
    target_lang: str = "",
    progress: Callable[[int], None] | None = None,
    revise: Callable[[list[Item], list[Translation]], list[Translation]] | None = None,
    apart: Callable[[Item], object] | None = None,
    constrain: Callable[[int, list[Item]], list[Item] | None] | None = None,
) -> list[Translation]:
    """One Translation per line of ``lines``, in order.

    ``split_sentences``: each line is split into its sentences by the rules of ``lang``
    (:func:`keras_nmt.text.sentences.split_sentences`), else taken whole, and the
    translations of a line's sentences are joined for the target language
    ``target_lang`` (:func:`join_translations`). ``read`` turns
    a sentence into what ``decode`` takes (its :class:`Source`, or the text itself).
    The sentences are decoded ``batch_size`` at a time, sorted by the ``len`` of what
    ``read`` gave (less padding): ``decode(batch)`` gives each its Translation. With
    ``skip_empty``, a sentence of length 0 is not decoded and gets that Translation.
    ``revise(items, translations)`` may then rework the sentences' translations (the
    onnxruntime path aligns them). Each line's Translation joins its sentences'
    (:func:`join_translations`). The sentences for which ``apart(item)`` is true are
    batched apart from the others (vocabulary selection scores a batch holding a rare
    source word on the whole vocabulary, :func:`rare_source`); more generally, items
    batch together only when ``apart`` gives them equal keys.

    ``constrain(n, items)`` gives line n's sentences (their items) with what their
    outputs must respect (:func:`keras_nmt.decoding.constraints.attach`), or None when line n
    must be translated whole: it is then read as one sentence and asked again.

    ``progress`` is called after each batch with the number of lines it finished (a line
    is finished with its last sentence; a line none of whose sentences is decoded is
    never counted)."""
    parts = [sentence_rules.split_sentences(line, lang) if split_sentences else [line]
             for line in lines]
    found_lines = read_lines(lines, parts, read, constrain)
    items, parts = found_lines.items, found_lines.parts
    line_of = [i for i, found in enumerate(parts) for _ in found]
    left = collections.Counter(line_of)  # sentences of each line not decoded yet
    results: list[Translation | None] = [skip_empty] * len(items)
    todo = sorted((i for i, item in enumerate(items) if skip_empty is None or len(item)),
                  key=lambda i: len(items[i]))
    for chosen in batches_apart(todo, items, batch_size, apart):
        for i, translation in zip(chosen, decode([items[i] for i in chosen]), strict=True):
            results[i] = translation
        if progress is not None:
            done = 0
            for i in chosen:
                left[line_of[i]] -= 1
                done += left[line_of[i]] == 0
            progress(done)
    if revise is not None:
        results = revise(items, results)  # type: ignore[arg-type]
    return found_lines.joined(results, target_lang)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class ReadLines:
    """Lines read into what a search decodes: ``items`` (one a search row, in line order),
    ``parts``, each line's sentences (a line translated whole: the line itself), and
    ``sentence_counts``, each line's sentences once split, whether kept whole or not."""

    items: list
    parts: list[list[str]]
    sentence_counts: list[int]

    @property
    def counts(self) -> list[int]:
        """Items of each line, in order."""
        return [len(found) for found in self.parts]

    def joined(self, results: Sequence[Translation], target_lang: str = "") -> list[Translation]:
        """Each line's Translation from its items' ``results`` (:func:`join_translations`)."""
        lines, start = [], 0
        for count in self.counts:
            lines.append(join_translations(results[start : start + count], target_lang))
            start += count
        return lines


def read_lines(lines: Sequence[str], parts: list[list[str]], read: Callable[[str], Item],
               constrain: Callable[[int, list[Item]], list[Item] | None] | None = None
               ) -> ReadLines:
    """``lines``, split into ``parts`` (each line's sentences), read into search items by
    ``read``, with their constraints when ``constrain`` is given (:func:`translate_lines`);
    a line ``constrain`` keeps whole is read as one item. Cost: one ``read`` per sentence
    (and per line kept whole)."""
    parts = list(parts)
    split = [len(found) for found in parts]
    per_line = [[read(sentence) for sentence in found] for found in parts]
    if constrain is not None:
        for n, line in enumerate(lines):
            attached = constrain(n, per_line[n])
            if attached is None:
                parts[n] = [line]
                attached = constrain(n, [read(line)])
            per_line[n] = attached  # type: ignore[assignment]
    return ReadLines([item for found in per_line for item in found], parts, split)


def batches_apart(todo: Sequence[int], items: Sequence, batch_size: int,
                  apart: Callable | None = None) -> list[list[int]]:
    """``todo`` (numbers of ``items``, in the order to decode them) cut into batches of at
    most ``batch_size``, the items of each key of ``apart`` (a bool, or any keys that sort)
    apart from the others: those with the smallest key first (False before True), each
    part in ``todo``'s order (all together without ``apart``)."""
    flags = {i: apart(items[i]) if apart is not None else False for i in todo}
    batches = []
    for part in sorted(set(flags.values())):
        members = [i for i in todo if flags[i] == part]
        batches += [members[start : start + batch_size]
                    for start in range(0, len(members), batch_size)]
    return batches


def rare_source(rare) -> Callable[[Source], bool] | None:
    """``translate_lines``'s ``apart`` under vocabulary selection: whether a sentence holds
    an id that ``rare`` (bool [source vocabulary], :meth:`keras_nmt.lexicon.table.Lexicon.rare_sources`)
    marks. None when it marks none."""
    rare = None if rare is None else np.asarray(rare, bool)
    if rare is None or not rare.any():
        return None
    return lambda source: bool(rare[np.asarray(source.ids, np.int64)].any())
