"""RNNsearch and RNNencdec as one Keras model built from a :class:`Config`."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.core.config import Config
from keras_nmt.layers import Decoder, Encoder
from keras_nmt.core.constants import PAD_ID


@keras.saving.register_keras_serializable(package="keras_nmt")
class TranslationModel(keras.Model):
    """Encoder + decoder. ``config.architecture`` picks the paper's model:

    - ``search``: bidirectional encoder, attention, s_0 = tanh(W_s h<-_1);
    - ``encdec``: forward encoder, c_i fixed to h->_Tx, s_0 = tanh(W_s h->_Tx).

    ``call`` is teacher forcing for training; :meth:`encode` and :meth:`step` are the
    pieces a search algorithm drives one target word at a time.

    The model computes in ``config.precision`` (a Keras dtype policy: variables float32,
    computation float32, bfloat16 or float16), given to every layer, with no global
    policy. Every entry (:meth:`call`, :meth:`forced`, :meth:`encode`, :meth:`step`) goes
    through Keras's ``__call__``, the one place where variables are cast to the compute
    dtype: a plain method would see them in float32 and mix dtypes. ``precision``
    overrides the config's (an export computes in float32 whatever the run trained in).
    """

    def __init__(self, config: Config | dict, precision: str | None = None, **kwargs):
        if isinstance(config, dict):
            config = Config.from_dict(config)
        super().__init__(dtype=precision or config.precision, **kwargs)
        self.config = config
        shared = dict(reset_after=config.reset_after, dropout=config.dropout, init=config.init,
                      dtype=self.dtype_policy)
        self.encoder = Encoder(config.src_vocab_size, config.embedding, config.hidden,
                               bidirectional=config.uses_attention, name="encoder", **shared)
        self.decoder = Decoder(config.tgt_vocab_size, config.embedding, config.hidden,
                               config.attention, config.maxout,
                               use_attention=config.uses_attention, name="decoder",
                               embedding=self.encoder.embedding if config.tie_embeddings else None,
                               **shared)
        self.build((None, None))

    def build(self, input_shape=None):
        self.encoder.build((None, None))
        self.decoder.build(self.encoder.output_dim, self.config.hidden)
        self.built = True

    def encode(self, source_ids, training=False):
        """Source ids [B, Tx] -> (s_0 [B, n], memory dict for :meth:`step`)."""
        return self(source_ids, training=training, mode="encode")

    def step(self, previous_ids, state, memory, projection=None):
        """(y_(i-1) [B], s_(i-1), memory) -> (logits [B, V], s_i, attention [B, Tx]);
        logits [B, C] over the columns of ``projection`` (:meth:`output_projection`).
        The B rows may be a beam's hypotheses of fewer sentences, the memory's rows, laid
        out as :mod:`keras_nmt.layers.row_layout` says."""
        if projection is None:
            return self((previous_ids, state, memory), mode="step")
        return self((previous_ids, state, memory, projection), mode="step")

    def output_projection(self, columns, count):
        """The output layer restricted to the words ``columns`` (int [C], the first
        ``count`` real, the rest padding), for :meth:`step`: computed once per batch by
        a search, instead of gathering (or padding) over the vocabulary every step."""
        return self((columns, count), mode="columns")

    def forced(self, source_ids, target_in, training=False):
        """Teacher forcing that also returns the attention weights [B, T, Tx]."""
        return self((source_ids, target_in), training=training, mode="forced")

    def call(self, inputs, training=False, mode="logits"):
        """``mode`` "logits" (what Keras and training call): (source ids [B, Tx], target
        input ids [B, T]) -> logits [B, T, V]; "hidden": the same inputs -> the deep
        output's maxout layer [B, T, l], for a sampled softmax; "forced", "encode",
        "step" and "columns" (:meth:`output_projection`): the methods of the same names (they call this, so that Keras casts the
        variables)."""
        if mode == "encode":
            annotations, mask, summary = self.encoder(inputs, training=training)
            return self.decoder.start(annotations, mask, summary, stepwise=True)
        if mode == "step":
            return self.decoder.step(*inputs)
        if mode == "columns":
            return self.decoder.readout.columns(*inputs)
        annotations, mask, summary = self.encoder(inputs[0], training=training)
        state, memory = self.decoder.start(annotations, mask, summary)
        outputs, weights = self.decoder(inputs[1], state, memory, hidden_only=mode == "hidden",
                                        training=training)
        return (outputs, weights) if mode == "forced" else outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "precision": self.dtype_policy.name,
                "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def sentence_nll(logits, targets, label_smoothing: float = 0.0):
    """Per-sentence negative log-likelihood [B]: summed over target tokens, padding
    (id 0) masked. The paper's training cost and its Table 2 figure. Computed in
    float32 whatever the logits' dtype (mixed precision): a float16 softmax over 30,000
    words loses the small probabilities. ``label_smoothing`` > 0: the smoothed training
    loss instead (:func:`_masked_nll`)."""
    logits = tf.cast(logits, tf.float32)
    return tf.reduce_sum(_masked_nll(logits, targets, targets, label_smoothing), axis=1)


def token_nll(logits, targets):
    """The terms of :func:`sentence_nll`, one per target token [B, T] (0 at padding):
    what force decoding (:mod:`keras_nmt.evaluation.forced`) reports token by token."""
    return _masked_nll(tf.cast(logits, tf.float32), targets, targets)


def _masked_nll(logits, labels, targets, label_smoothing: float = 0.0, log_q=None):
    """Softmax cross-entropy of ``labels`` (columns of ``logits``) at each token, the
    padding of ``targets`` masked: [B, T].

    With ``label_smoothing`` e: (1 - e) x that + e x the cross-entropy against the
    uniform distribution over the vocabulary, log Z - mean(logit). When the columns are a
    sampled softmax's candidates (``log_q`` [K]: log of each one's chance to be drawn,
    ``logits`` already corrected by -log q), the mean over the vocabulary is estimated
    from them, each candidate standing for 1 / q words: the batch's own words count once,
    a drawn one for the words like it that were not drawn."""
    mask = tf.cast(tf.not_equal(targets, PAD_ID), tf.float32)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    if label_smoothing:
        if log_q is None:
            mean_logit = tf.reduce_mean(logits, axis=-1)
        else:
            weights = tf.exp(-log_q)
            mean_logit = (tf.tensordot(logits + log_q, weights, axes=[[2], [0]])
                          / tf.reduce_sum(weights))
        # log Z = nll + the label's logit, so the smoothed loss needs no second pass of
        # exponentials over the logits: (1 - e) nll + e (log Z - mean) = nll + e (z - mean).
        label_logit = tf.squeeze(tf.gather(logits, labels[..., None], batch_dims=2), -1)
        nll = nll + label_smoothing * (label_logit - mean_logit)
    return nll * mask


def sampled_candidates(targets, vocab_size: int, count: int, seed):
    """The output words a sampled softmax scores for a batch: every id in ``targets``
    (PAD included) and, filling up to ``count``, others drawn uniformly without
    replacement. Returns (ids [count], log q [count]) where q is each word's probability
    of being among them: 1 for the batch's own words, (count - n) / (V - n) for a drawn
    one (n = the batch's distinct ids). Fixed shapes, so XLA compiles it once."""
    present = tf.scatter_nd(tf.reshape(targets, [-1, 1]),
                            tf.ones([tf.size(targets)], tf.float32), [vocab_size]) > 0
    noise = tf.random.stateless_uniform([vocab_size], seed, dtype=tf.float32)
    # The batch's words rank above every drawn one (keys >= 2 against [0, 1)).
    _, ids = tf.math.top_k(tf.where(present, 2.0 + noise, noise), k=count)
    n = tf.reduce_sum(tf.cast(present, tf.float32))
    drawn_q = (count - n) / tf.maximum(float(vocab_size) - n, 1.0)
    log_q = tf.where(tf.gather(present, ids), 0.0, tf.math.log(tf.maximum(drawn_q, 1e-30)))
    return ids, log_q


def sampled_sentence_nll(hidden, targets, output_kernel, output_bias, count: int, seed,
                         candidates_from=None, label_smoothing: float = 0.0):
    """Per-sentence NLL [B] with the softmax over :func:`sampled_candidates` only (Jean et
    al., 2015, with a uniform proposal): each drawn word's logit is corrected by -log q,
    so the sum over the drawn words estimates the sum over every word the batch lacks.
    With ``count`` = V every word is a candidate (q = 1): exactly :func:`sentence_nll`.
    ``hidden``: the maxout layer [B, T, l]; ``output_kernel`` [l, V], ``output_bias`` [V].
    ``candidates_from``: the targets whose words are always candidates, when ``targets``
    are only some rows of a batch (one replica's); default ``targets``.
    ``label_smoothing``: the smoothed loss of :func:`_masked_nll`, its uniform part
    estimated from the candidates."""
    vocab_size = int(output_kernel.shape[-1])
    ids, log_q = sampled_candidates(
        targets if candidates_from is None else candidates_from, vocab_size, count, seed)
    kernel = tf.cast(tf.gather(output_kernel, ids, axis=1), hidden.dtype)
    bias = tf.cast(tf.gather(output_bias, ids), hidden.dtype)
    logits = tf.cast(tf.nn.bias_add(tf.einsum("btl,lk->btk", hidden, kernel), bias), tf.float32)
    position = tf.scatter_nd(ids[:, None], tf.range(count), [vocab_size])  # word -> column
    return tf.reduce_sum(_masked_nll(logits - log_q, tf.gather(position, targets), targets,
                                     label_smoothing, log_q), axis=1)
