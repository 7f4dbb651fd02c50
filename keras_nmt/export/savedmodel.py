"""A run's model as a TF Serving SavedModel, written with ``keras.export.ExportArchive``.

Signatures (the export contract: README, and docs/export-serving.md, "What an export holds"):
``serving_default``, raw sentences -> ``translations``, ``scores``, ``truncated``, the
confidence outputs (:mod:`keras_nmt.decoding.confidence_graph`), n-best and ``attention`` when
exported; ``translate``, the same with ``beam_size`` and ``alpha`` inputs; ``translate_ids``,
ids -> ids and scores (:func:`keras_nmt.search.make_translate_fn`, what ONNX is made from);
with ``ExportSettings.constrained``, ``translate_ids_constrained`` and ``translate_constrained``
(phrases to include and avoid, a prefix; ``unmet`` out; each line whole). With a shortlist,
the string signatures select from the lexical table (a graph constant) with unchanged inputs;
``translate_ids`` takes ``shortlist_frequent`` and ``shortlist_best`` (both 0: exact search).
The string signatures split sentences (:mod:`keras_nmt.text.sentences_graph`), encode with
:meth:`keras_nmt.rundir.run_directory.RunDir.graph_encoders`, truncate, search in one
``tf.while_loop`` and join, all in the graph; a SentencePiece export needs TF Text's ops.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable

import keras
import tensorflow as tf

from keras_nmt.decoding import confidence_graph
from keras_nmt import search
from keras_nmt.core.constants import PAD_ID
from keras_nmt.lexicon.table import RARE_COUNT, marked_sources
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.text import sentences_graph, word_graph
from keras_nmt.text.codecs import SENTENCEPIECE
from keras_nmt.text.graph_ids import append_eos

ID_OUTPUTS = ("ids", "lengths", "scores", "log_probs", "token_logprobs")
SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    beam_size: int
    alpha: float
    nbest: int = 1  # > 1: the string signatures also return the n-best list
    attention: bool = False  # the string signatures also return the best hypothesis' attention
    max_source_len: int = 100  # source tokens kept (EOS not counted)
    shortlist: tuple[int, int] | None = None  # (F, B) of serving_default; None: every word
    split_sentences: bool = True  # a line of several sentences: each translated alone
    # Every written <unk> replaced by its most attended source word, through the run's
    # dictionary (keras_nmt.decoding.unk_replace_graph; a word run that attends)
    unk_replace: bool = False
    # Also the constrained search over ids (translate_ids_constrained; its ONNX twin)
    constrained: bool = False


def translate_ids_function(model: TranslationModel, nbest: int,
                           lexicon_table=None, attention: bool = False,
                           constrained: bool = False) -> tuple[Callable, list]:
    """The ``translate_ids`` function (plain Python, to be traced) and its input signature:
    :func:`keras_nmt.search.make_translate_fn`'s (with the shortlist inputs when
    ``lexicon_table`` is given), with the ``attention`` output [B, n, T, S] only when
    asked (the ONNX search of an export that replaces ``<unk>``), and each token's
    log-probability (``token_logprobs`` [B, n, T], what a confidence is computed from).
    ``constrained``: the
    constrained search's (``translate_ids_constrained``: three more inputs, and the
    ``unmet`` output)."""
    translate_fn = search.make_translate_fn(model, nbest=max(1, nbest), autograph=False,
                                            lexicon_table=lexicon_table, attention=attention,
                                            constrained=constrained, token_logprobs=True)
    # The plain Python function: callers trace it themselves, no nested tf.function.
    search_fn = translate_fn.python_function
    outputs = (ID_OUTPUTS + (("attention",) if attention else ())
               + (("unmet",) if constrained else ()))

    def translate_ids(*inputs):
        out = search_fn(*inputs)
        return {key: out[key] for key in outputs}

    return translate_ids, list(translate_fn.input_signature)


def ids_to_text(ids, target_encoder):
    """Search output ids [B, N, T] -> text [B, N] with the run's target graph encoder (each
    row up to its first EOS, PAD and BOS skipped, as the Python codecs' ``decode``)."""
    shape = tf.shape(ids)
    flat = tf.reshape(ids, [shape[0] * shape[1], shape[2]])  # not -1: B * N may be 0
    return tf.reshape(target_encoder.decode(flat), shape[:2])


def make_string_translate(
    encoder,
    decode_text: Callable,
    settings: ExportSettings,
    search_fn: Callable,
    unknown_words=None,
    target_lang: str = "",
) -> Callable:
    """``(sentences, beam_size, alpha[, shortlist_frequent, shortlist_best]) -> dict`` of
    the string signatures. ``encoder``: sentences -> ragged source ids (a graph encoder of
    :mod:`keras_nmt.text`, its ``lang`` the source language); ``decode_text``: search
    output ids [B, N, T] -> text [B, N]; ``search_fn``:
    :func:`keras_nmt.search.make_translate_fn`'s function (the shortlist sizes go to it
    when it takes them). With ``settings.split_sentences`` each line is split into its
    sentences, and the line's outputs join theirs (texts joined for ``target_lang``).
    ``unknown_words``: a :class:`keras_nmt.decoding.unk_replace_graph.UnknownWords` writes the texts
    instead of ``decode_text``, every ``<unk>`` replaced (the search must return
    attention)."""
    max_len = int(settings.max_source_len)

    def translate_sentences(sentences, beam_size, alpha, shortlist, constraints=()) -> dict:
        """Each sentence's outputs: texts and scores [S, N] (N: the search's n-best
        width), which slots hold a hypothesis [S, N], truncated [S], the weight of each
        in its line's score (source tokens + EOS, [S]); with attention, the
        best hypothesis' [S, T, X] and its size (rows: output tokens + EOS, columns:
        source tokens + EOS; 0 for an empty sentence)."""
        if unknown_words is None:
            tokens = encoder(sentences, add_eos=False)  # ragged [B, None]
        else:  # the replacement reads the words the ids came from: tokenize once
            words = word_graph.tokenize(sentences, encoder.lang)
            tokens = encoder.ids(words, add_eos=False)
        counts = tf.cast(tokens.row_lengths(), tf.int32)
        truncated = tf.maximum(counts - max_len, 0)
        source_ids = append_eos(tokens[:, :max_len]).to_tensor(PAD_ID)
        # An empty batch gives [0, 0]; the encoder's RNN needs at least one time step.
        source_ids = tf.pad(source_ids, [[0, 0], [0, 1 - tf.minimum(tf.shape(source_ids)[1], 1)]])
        out = search_fn(
            source_ids, beam_size, alpha, tf.constant(False), tf.constant(0, tf.int32),
            *shortlist, *constraints,
        )
        # Empty and whitespace-only sentences translate to "" with score 0.0, as
        # Translator does (the search still ran on their lone EOS; its result is dropped).
        empty = tf.equal(counts, 0)
        if unknown_words is None:
            written, decode_prefixes = decode_text(out["ids"]), decode_text
        else:  # the word figures follow the words as replaced (a target may add words)
            tokens_written = unknown_words.written(words[:, :max_len], out["ids"],
                                                   out["attention"])
            written = unknown_words.join(tokens_written, out["ids"])
            decode_prefixes = unknown_words.prefix_decoder(tokens_written[:, 0])
        texts = tf.where(empty[:, None], tf.constant("", tf.string), written)
        # n-best lists of an empty sentence hold that one "" (the other slots are
        # unfilled: score -inf, as the search reports them).
        first_slot = tf.equal(tf.range(tf.shape(out["scores"])[1]), 0)[None, :]
        empty_scores = tf.where(first_slot, 0.0, float("-inf"))
        scores = tf.where(empty[:, None], empty_scores, out["scores"])
        filled = tf.where(empty[:, None], first_slot, out["lengths"] > 0)
        # Each word of the best translation and its figure (keras_nmt.decoding.confidence_graph).
        words, word_figures = confidence_graph.word_confidences(
            out["ids"][:, 0], out["token_logprobs"][:, 0],
            tf.where(empty, 0, out["lengths"][:, 0] - 1), texts[:, 0], decode_prefixes)
        result = {"texts": texts, "scores": scores, "filled": filled, "truncated": truncated,
                  "words": words, "word_confidence": word_figures,
                  "weights": tf.cast(tf.minimum(counts, max_len) + 1, tf.float32),
                  # The best hypothesis' summed log-probability and its tokens (EOS
                  # included), what its confidence is made of; none for an empty sentence.
                  "log_prob": tf.where(empty, 0.0, out["log_probs"][:, 0]),
                  "tokens": tf.where(empty, 0, out["lengths"][:, 0])}
        if constraints:
            result["unmet"] = out["unmet"][:, 0]
        if settings.attention:
            result["attention"] = tf.where(
                empty[:, None, None], tf.constant(0.0, tf.float32), out["attention"][:, 0]
            )
            result["rows"] = tf.where(empty, 0, out["lengths"][:, 0])
            result["columns"] = tf.where(empty, 0, tf.minimum(counts, max_len) + 1)
        return result

    def figures_of(found: dict) -> tuple[tf.Tensor, tf.Tensor]:
        """The confidence (keras_nmt.decoding.confidence) of each row of ``found``: exp of the
        mean log-probability of its tokens, and whether it has any (else no figure)."""
        tokens = tf.cast(found["tokens"], tf.float32)
        return tf.exp(found["log_prob"] / tf.maximum(tokens, 1.0)), tokens > 0

    def sentence_figures(found: dict, row_splits) -> tf.RaggedTensor:
        """Each line's sentences' confidences, of the sentences that have tokens (an
        empty one has none), ragged [lines, (sentences)]."""
        figures, has_tokens = figures_of(found)
        return tf.ragged.boolean_mask(tf.RaggedTensor.from_row_splits(figures, row_splits),
                                      tf.RaggedTensor.from_row_splits(has_tokens, row_splits))

    def join_lines(found: dict, row_splits) -> dict:
        """The sentences' outputs -> their lines' (keras_nmt.text.sentences' join)."""
        texts, scores = sentences_graph.join_nbest(
            found["texts"], found["scores"], found["filled"], found["weights"], row_splits,
            target_lang)
        joined = {"texts": texts, "scores": scores,
                  **{key: sentences_graph.join_sums(found[key], row_splits)
                     for key in ("truncated", "log_prob", "tokens")},
                  # A line's words: its sentences', one after the other.
                  **{key: tf.RaggedTensor.from_row_splits(found[key], row_splits).merge_dims(1, 2)
                     for key in ("words", "word_confidence")},
                  "sentence_confidence": sentence_figures(found, row_splits)}
        if settings.attention:
            joined["attention"] = sentences_graph.join_attention(
                found["attention"], found["rows"], found["columns"], row_splits)
        return joined

    def translate(sentences, beam_size, alpha, *shortlist, constraints=()):
        if constraints:  # a constrained line is translated whole (its phrases, its prefix)
            found = translate_sentences(sentences, beam_size, alpha, shortlist, constraints)
        elif settings.split_sentences:
            split = sentences_graph.split(sentences, encoder.lang)
            found = join_lines(
                translate_sentences(split.flat_values, beam_size, alpha, shortlist),
                split.row_splits)
        else:
            found = translate_sentences(sentences, beam_size, alpha, shortlist)
        if "sentence_confidence" not in found:  # each line translated whole: one sentence
            found["sentence_confidence"] = sentence_figures(
                found, tf.range(tf.shape(found["tokens"], out_type=tf.int64)[0] + 1))
        texts, scores = found["texts"], found["scores"]
        # The line's confidence, over all its sentences' tokens; NaN for a line without
        # any (empty), never a made-up figure.
        figures, has_tokens = figures_of(found)
        confidence = tf.where(has_tokens, figures, float("nan"))
        result = {"translations": texts[:, 0], "scores": scores[:, 0],
                  "truncated": found["truncated"], "confidence": confidence,
                  "sentence_confidence": found["sentence_confidence"].to_tensor(0.0),
                  "words": found["words"].to_tensor(""),
                  "word_confidence": found["word_confidence"].to_tensor(0.0)}
        if settings.nbest > 1:
            result["nbest_translations"] = texts
            result["nbest_scores"] = scores
        if settings.attention:
            result["attention"] = found["attention"]
        if constraints:
            result["unmet"] = found["unmet"]
        return result

    return translate


def phrase_ids(target_encoder, phrases):
    """Phrases as strings [N, P] ("" for none) -> their target ids [N, P, L], PAD-padded,
    tokenized by the run's target graph encoder as the output is."""
    shape = tf.shape(phrases)
    ids = target_encoder(tf.reshape(phrases, [-1]), add_eos=False).to_tensor(PAD_ID)
    return tf.reshape(ids, tf.concat([shape, tf.shape(ids)[1:]], axis=0))


def build_archive(
    model: TranslationModel,
    encoders: tuple,
    settings: ExportSettings,
    lexicon_table=None,
    unknown_words=None,
) -> keras.export.ExportArchive:
    """The ExportArchive with the three signatures (not yet written). ``encoders``: the
    run's (source, target) graph encoders, :meth:`keras_nmt.rundir.run_directory.RunDir.graph_encoders`;
    ``lexicon_table``: the run's lexical table (targets), needed with ``settings.shortlist``;
    ``unknown_words``: a :class:`keras_nmt.decoding.unk_replace_graph.UnknownWords`, needed with
    ``settings.unk_replace``."""
    encoder, target_encoder = encoders
    if settings.unk_replace and unknown_words is None:
        raise ValueError("an export that replaces <unk> needs the unknown words' module")
    if settings.shortlist and lexicon_table is None:
        raise ValueError("a shortlist export needs the lexical table")
    table = lexicon_table if settings.shortlist else None
    # The string signatures' search keeps attention only when they return it.
    search_fn = search.make_translate_fn(
        model, nbest=max(1, settings.nbest), autograph=False, lexicon_table=table,
        attention=settings.attention or settings.unk_replace, token_logprobs=True,
    ).python_function
    if table is not None:
        # Sentences with a rare source word decode apart, over the whole vocabulary.
        search_fn = search.rare_apart(search_fn, marked_sources(table))
    unknown_words = unknown_words if settings.unk_replace else None
    string_translate = make_string_translate(
        encoder, lambda ids: ids_to_text(ids, target_encoder), settings, search_fn, unknown_words,
        target_encoder.lang,
    )

    archive = keras.export.ExportArchive()
    # The model's layers are not tracked: the archive saves every variable the endpoints
    # use anyway (as the tf.Variables they capture), and tracking the layers would save
    # each weight a second time, as its keras.Variable wrapper (keras-team/keras#23553:
    # twice the size on disk and in a server's memory). The lookup table is not a
    # variable, so it must be tracked; so must the SentencePiece models (resources).
    archive.track(encoder)
    if target_encoder.kind == SENTENCEPIECE or settings.constrained:
        # A word target side decodes from a constant token list; its table is needed
        # only to read constrained phrases.
        archive.track(target_encoder)
    if unknown_words is not None:
        archive.track(unknown_words)  # the dictionary's lookup table

    beam_size = tf.constant(int(settings.beam_size), tf.int32)
    alpha = tf.constant(float(settings.alpha), tf.float32)
    shortlist = [tf.constant(int(n), tf.int32) for n in settings.shortlist or ()]
    translate_signature = [SENTENCES, tf.TensorSpec([], tf.int32, name="beam_size"),
                           tf.TensorSpec([], tf.float32, name="alpha")]
    # Both string signatures call this one function. Saving traces every signature twice;
    # this way the search, most of an export's tracing, is traced twice in all instead
    # of four times (an export's CPU time 0.81x).
    translate_text = tf.function(
        lambda sentences, beam, alpha_: string_translate(
            sentences, beam, tf.where(alpha_ < 0.0, alpha, alpha_), *shortlist),
        input_signature=translate_signature, autograph=False)
    archive.add_endpoint(
        "serving_default",
        lambda sentences: translate_text(sentences, beam_size, tf.constant(-1.0)),
        input_signature=[SENTENCES],
    )
    archive.add_endpoint("translate", lambda *inputs: translate_text(*inputs),
                         input_signature=translate_signature)
    translate_ids, ids_signature = translate_ids_function(model, settings.nbest, table)
    archive.add_endpoint("translate_ids", translate_ids, input_signature=ids_signature)
    if settings.constrained:
        constrained_ids, constrained_signature = translate_ids_function(
            model, settings.nbest, table, constrained=True)
        archive.add_endpoint("translate_ids_constrained", constrained_ids,
                             input_signature=constrained_signature)
        guided_fn = search.make_translate_fn(
            model, nbest=max(1, settings.nbest), autograph=False, lexicon_table=table,
            attention=settings.attention or settings.unk_replace, constrained=True,
            token_logprobs=True,
        ).python_function
        if table is not None:
            guided_fn = search.rare_apart(guided_fn, marked_sources(table), per_sentence=3)
        guided_translate = make_string_translate(
            encoder, lambda ids: ids_to_text(ids, target_encoder), settings, guided_fn,
            unknown_words, target_encoder.lang)

        def translate_constrained(sentences, include, avoid, prefix):
            constraints = (phrase_ids(target_encoder, include),
                           phrase_ids(target_encoder, avoid),
                           phrase_ids(target_encoder, prefix[:, None])[:, 0])
            return guided_translate(sentences, beam_size, alpha, *shortlist,
                                    constraints=constraints)

        archive.add_endpoint("translate_constrained", translate_constrained, input_signature=[
            SENTENCES, tf.TensorSpec([None, None], tf.string, name="include"),
            tf.TensorSpec([None, None], tf.string, name="avoid"),
            tf.TensorSpec([None], tf.string, name="prefix")])
    return archive


def write_savedmodel(archive: keras.export.ExportArchive, path: str | pathlib.Path) -> None:
    archive.write_out(str(path), verbose=False)


def signature_summary(settings: ExportSettings) -> dict[str, str]:
    """One line per signature, for SERVING.md."""
    extra = ""
    if settings.nbest > 1:
        extra += (f", `nbest_translations` string [N, {settings.nbest}], "
                  f"`nbest_scores` float32 [N, {settings.nbest}] (-inf in unfilled slots)")
    if settings.attention:
        extra += ", `attention` float32 [N, T, S] (best translation, source EOS included)"
    outputs = ("`translations` string [N], `scores` float32 [N] (length-normalised "
               "log-probability), `truncated` int32 [N] (source tokens dropped beyond "
               f"{settings.max_source_len}), `confidence` float32 [N] (exp of the mean "
               "log-probability of the translation's tokens and EOS, its sentences' tokens "
               "together; NaN for an empty line), `sentence_confidence` float32 [N, S] (the "
               "figure of each of its sentences that has tokens; 0 after the last), `words` "
               "string [N, W] (the translation's "
               "space-separated words, \"\" after the last) and `word_confidence` float32 "
               "[N, W] (each word's figure: the smallest probability of its tokens; 0 after "
               "the last word)" + extra)
    selection, inputs = "", ""
    if settings.shortlist:
        frequent, best = settings.shortlist
        selection = (f"; vocabulary selection: the {frequent} most frequent target words and "
                     f"the {best} best translations of each source word (a sentence with a "
                     f"source word training saw at most {RARE_COUNT} times: every word)")
        inputs = (", `shortlist_frequent` int32, `shortlist_best` int32 (both 0: the whole "
                  "vocabulary; a batch holding a source word training saw at most "
                  f"{RARE_COUNT} times is scored on every word)")
    if settings.unk_replace:
        outputs += ("; every `<unk>` a translation would hold is the source word its step "
                    "attended to most, through the run's dictionary.tsv (copied when it "
                    "lacks the word)")
    split = ("; a line of several sentences is split into them (the source language's rules "
             "of keras_nmt.text.sentences), each is translated alone and the line's outputs "
             "join theirs: texts one space apart (none in Chinese and Japanese), `truncated` "
             "summed, the score the mean of the sentences' weighted by their source tokens + "
             "EOS, the n-best list the line's best combinations of one hypothesis per "
             "sentence by that score, attention block-diagonal" if settings.split_sentences else
             "; each line is translated whole, as one sentence")
    ids_inputs = ("`source_ids` int32 [N, S] (0-padded, EOS=3 appended), `beam_size` "
                  "int32, `alpha` float32, `forbid_unk` bool, `max_length` int32 "
                  f"(<= 0: the decode-ratio rule){inputs}")
    ids_outputs = ("`ids` int32 [N, n, T], `lengths` int32 [N, n], `scores` float32 [N, n], "
                   "`log_probs` float32 [N, n], `token_logprobs` float32 [N, n, T] (each "
                   "token's log-probability, EOS's included, 0 after it)")
    summary = {
        "serving_default": f"`sentences` string [N] (raw text) -> {outputs}; beam "
                           f"{settings.beam_size}, alpha {settings.alpha:g}{selection}{split}",
        "translate": "`sentences` string [N], `beam_size` int32, `alpha` float32 (< 0: "
                     f"the export's, {settings.alpha:g}) -> the outputs of "
                     f"serving_default{selection}",
        "translate_ids": f"{ids_inputs} -> {ids_outputs}",
    }
    if settings.constrained:
        summary["translate_ids_constrained"] = (
            f"{ids_inputs}, `include_ids` int32 [N, P, L] (phrases to include), `avoid_ids` "
            "int32 [N, P, L] (phrases to avoid), `prefix_ids` int32 [N, L] (the prefix), "
            "target ids padded with 0 (a row of 0: no phrase) -> the outputs of "
            f"translate_ids, `unmet` int32 [N, n] (phrases the length limit kept out)")
        summary["translate_constrained"] = (
            "`sentences` string [N], `include` string [N, P] (phrases the translation must "
            "hold, \"\" for none), `avoid` string [N, Q] (phrases it must not), `prefix` "
            "string [N] (its first words, \"\" for none) -> the outputs of serving_default "
            "and `unmet` int32 [N]; beam and alpha of serving_default, phrases tokenized as "
            "the output is, each line translated whole (not split into sentences); a phrase "
            "word outside the target vocabulary is decoded as <unk> (onnx-translate and "
            "keras-nmt serve write the phrase's word there)")
    return summary
