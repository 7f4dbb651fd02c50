"""The beam search as one ``tf.function`` with a fixed signature: what the Translator,
the SavedModel and the ONNX model all run (:func:`make_translate_fn`), and a search run
on a batch's rare and common sentences apart (:func:`rare_apart`).

Contract: the function traces once, for any batch and source length, and returns
:func:`~keras_nmt.search.beam.beam_search`'s dict. Cost: the search's own, plus with
``jit_compile`` one XLA compilation per distinct input shape.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from keras_nmt.search.beam import beam_search
from keras_nmt.search.constrained import Constraints
from keras_nmt.search.shortlist import Shortlist


def make_translate_fn(
    model, nbest: int = 1, max_decode_ratio: float | None = None, autograph: bool = True,
    jit_compile: bool = False, lexicon_table: np.ndarray | None = None, attention: bool = True,
    constrained: bool = False, token_logprobs: bool = False,
):
    """A ``tf.function`` around :func:`~keras_nmt.search.beam.beam_search` that traces once.

    Signature: ``translate(source_ids int32 [None, None], beam_size int32 [],
    alpha float32 [], forbid_unk bool [], max_length int32 [])`` -> the dict of
    ``beam_search``; ``max_length <= 0`` selects the ratio rule (the model's
    ``config.max_decode_ratio`` unless ``max_decode_ratio`` is given). ``nbest`` is
    fixed here, as a Python constant.

    ``lexicon_table`` (int32 [source vocabulary, best], a :class:`~keras_nmt.lexicon.table.Lexicon`'s
    ``targets``) becomes a constant of the graph and the signature gains two inputs,
    ``shortlist_frequent`` and ``shortlist_best`` (int32 []), the :class:`Shortlist` of
    every call: both <= 0 decodes over the whole vocabulary.

    ``attention``: the result holds the ``attention`` output (``beam_search``); without
    it a step does less.

    ``constrained``: the signature gains, after the others, ``include_ids`` and
    ``avoid_ids`` (int32 [B, phrases, tokens]) and ``prefix_ids`` (int32 [B, tokens]),
    PAD-padded word ids (:class:`~keras_nmt.search.constrained.Constraints`), and the
    result ``unmet``. Without it the graph is the plain search's.

    ``token_logprobs``: the result holds the ``token_logprobs`` output (``beam_search``),
    what a translation's confidence is computed from.

    ``jit_compile`` compiles the model's ``encode`` and ``step`` with XLA: the decoder
    step (GRU, attention, deep output over the vocabulary) is where decoding spends its
    time. The loop itself stays a TF while loop, since its history grows by one column
    a step and XLA needs loop variables of fixed shape. XLA compiles once per distinct
    input shape.
    """
    if jit_compile:
        model = _XlaSteps(model)
    ratio = float(model.config.max_decode_ratio if max_decode_ratio is None else max_decode_ratio)
    if math.isnan(ratio) or ratio < 0:
        raise ValueError(f"max_decode_ratio must be >= 0, got {ratio}")

    def translate(source_ids, beam_size, alpha, forbid_unk, max_length, *extra):
        constraints = None
        if constrained:
            extra, constraints = extra[:-3], Constraints(*extra[-3:])
        selection = extra
        shortlist = None
        if selection:
            # Built in the traced function, so the table is a constant of the graph
            # (a SavedModel and an ONNX model carry it) rather than a captured tensor.
            shortlist = Shortlist(tf.constant(lexicon_table, tf.int32), *selection)
        return beam_search(
            model,
            source_ids,
            beam_size,
            alpha=alpha,
            forbid_unk=forbid_unk,
            max_length=max_length,
            nbest=nbest,
            max_decode_ratio=ratio,
            shortlist=shortlist,
            compact=not jit_compile,  # XLA compiles once per shape: keep the batch whole
            attention=attention,
            constraints=constraints,
            token_logprobs=token_logprobs,
        )

    if lexicon_table is not None:
        lexicon_table = np.asarray(lexicon_table, np.int32)
    return tf.function(translate, input_signature=_signature(lexicon_table is not None,
                                                             constrained),
                       autograph=autograph)


def _signature(selecting: bool, constrained: bool) -> list[Any]:
    """:func:`make_translate_fn`'s inputs, the shortlist's and the constraints' last."""
    signature: list[Any] = [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.bool, name="forbid_unk"),
        tf.TensorSpec([], tf.int32, name="max_length"),
    ]
    if selecting:
        signature += [tf.TensorSpec([], tf.int32, name="shortlist_frequent"),
                      tf.TensorSpec([], tf.int32, name="shortlist_best")]
    if constrained:
        signature += [tf.TensorSpec([None, None, None], tf.int32, name="include_ids"),
                      tf.TensorSpec([None, None, None], tf.int32, name="avoid_ids"),
                      tf.TensorSpec([None, None], tf.int32, name="prefix_ids")]
    return signature


def rare_apart(search_fn: Callable, rare: np.ndarray, per_sentence: int = 0) -> Callable:
    """``search_fn`` (:func:`make_translate_fn`'s function, or its Python function, with
    the shortlist inputs) run on two parts of every batch: the sentences without a source
    id that ``rare`` marks (bool [source vocabulary],
    :meth:`~keras_nmt.lexicon.table.Lexicon.rare_sources`), then those with one; the outputs
    come back merged in the batch's order. So a selecting search scores only the rare
    sentences on the whole vocabulary, whatever else the batch holds, as the
    translators' own batching does (:func:`keras_nmt.decoding.translation.rare_source`). Plain
    TensorFlow (a part may be empty); for the SavedModel's string signatures, not for
    ONNX, where ``translate_ids`` decides per batch. The last ``per_sentence`` inputs
    have a row per sentence (a constrained search's phrases): each part gets its rows."""
    rare = np.asarray(rare, bool)

    def search(source_ids, beam_size, alpha, forbid_unk, max_length, *extra):
        split = len(extra) - per_sentence
        selection, rows = extra[:split], extra[split:]
        # A constant of the traced graph, as make_translate_fn's table, not a capture.
        flags = tf.reduce_any(tf.gather(tf.constant(rare), source_ids), axis=1)  # [B]
        parts = [tf.cast(tf.reshape(tf.where(want), [-1]), tf.int32)
                 for want in (tf.logical_not(flags), flags)]
        outputs = [search_fn(tf.gather(source_ids, part), beam_size, alpha, forbid_unk,
                             max_length, *selection, *[tf.gather(x, part) for x in rows])
                   for part in parts]
        back = tf.math.invert_permutation(tf.concat(parts, axis=0))
        merged = {}
        for key, first in outputs[0].items():
            pair = [first, outputs[1][key]]
            # [B, N, T, ...]: T, the output length, differs
            if key in ("ids", "attention", "token_logprobs"):
                width = tf.maximum(tf.shape(pair[0])[2], tf.shape(pair[1])[2])
                pair = [_pad_axis(x, 2, width) for x in pair]
            merged[key] = tf.gather(tf.concat(pair, axis=0), back)
        return merged

    return search


def _pad_axis(x, axis: int, size):
    """``x`` zero-padded at the end of ``axis`` to ``size``."""
    pads = [[0, 0]] * len(x.shape)
    pads[axis] = [0, size - tf.shape(x)[axis]]
    return tf.pad(x, pads)


class _XlaSteps:
    """A model whose ``encode`` and ``step`` run XLA-compiled (see make_translate_fn)."""

    def __init__(self, model):
        self.config = model.config
        self.encode = tf.function(model.encode, jit_compile=True, autograph=False)
        self.step = tf.function(model.step, jit_compile=True, autograph=False)
        self.output_projection = model.output_projection
