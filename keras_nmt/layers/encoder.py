"""The source encoder: word embeddings and a (bi)directional GRU (paper, A.2.1)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import gru, initializers
from keras_nmt.layers.linear import apply_kernel
from keras_nmt.core.constants import PAD_ID


RECURRENCES = ("auto", "fused", "keras")


def default_recurrence() -> str:
    """``"keras"`` (cuDNN) when TensorFlow sees a GPU, else ``"fused"``."""
    return "keras" if tf.config.list_logical_devices("GPU") else "fused"


@keras.saving.register_keras_serializable(package="keras_nmt")
class Encoder(keras.layers.Layer):
    """Source ids -> annotations h_j and the summary vector that starts the decoder.

    Bidirectional (RNNsearch): h_j = [h->_j ; h<-_j] and the summary is h<-_1, the
    backward state after reading the whole sentence. Unidirectional (RNNencdec): h_j =
    h->_j and the summary is h->_Tx, the fixed context c of the encoder-decoder.
    Padding (id 0) is masked, so a sentence encodes the same whatever batch it is in.

    Two recurrences over the same weights (the Keras GRU layers'), chosen by
    ``recurrence``: ``"fused"`` runs both directions in one ``tf.scan`` (:func:`_recur`),
    the fast path on a CPU; ``"keras"`` calls the Keras GRU layers, whose cuDNN kernel is
    the fast path on a GPU (cuDNN needs ``reset_after=True``; with the paper's
    reset-before gate Keras runs its own loop). ``"auto"``, the default, takes ``"keras"``
    when TensorFlow sees a GPU. Checkpoints are the same either way.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        units: int,
        bidirectional: bool = True,
        reset_after: bool = False,
        recurrence: str = "auto",
        dropout: float = 0.0,
        init: str = "paper",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.dropout = dropout
        self.init = initializers.check_scheme(init)
        # On the embeddings and on the annotations, in training only (beyond the paper).
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy) if dropout else None
        self.annotation_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy) if dropout else None
        if recurrence not in RECURRENCES:
            raise ValueError(f"recurrence must be one of {', '.join(RECURRENCES)}, got {recurrence!r}")
        self.recurrence = recurrence
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.bidirectional = bidirectional
        self.reset_after = reset_after
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, embeddings_initializer=initializers.weight(init),
            name="embedding", dtype=self.dtype_policy,
        )
        # Keras GRU layers hold the weights (in the layout checkpoints and the cuDNN
        # kernel use); the recurrence itself is _recur, which reverses the backward
        # direction's input by each sentence's length.
        self.forward_rnn = self._gru("forward_gru")
        self.backward_rnn = self._gru("backward_gru") if bidirectional else None

    def _gru(self, name: str) -> keras.layers.GRU:
        return keras.layers.GRU(
            self.units,
            return_sequences=True,
            return_state=True,
            reset_after=self.reset_after,
            kernel_initializer=initializers.weight(self.init),
            recurrent_initializer=initializers.recurrent(self.init),
            bias_initializer="zeros",
            name=name,
            dtype=self.dtype_policy,
        )

    @property
    def output_dim(self) -> int:
        return self.units * (2 if self.bidirectional else 1)

    def build(self, input_shape):
        batch, time = input_shape[0], input_shape[1]
        self.embedding.build((batch, time))
        self.forward_rnn.build((batch, time, self.embedding_dim))
        if self.backward_rnn is not None:
            self.backward_rnn.build((batch, time, self.embedding_dim))

    def call(self, source_ids, training=False):
        """Returns (annotations [B, Tx, output_dim], mask [B, Tx] bool, summary [B, units])."""
        annotations, mask, summary = self._annotate(source_ids, training)
        if self.annotation_dropout is not None:
            annotations = self.annotation_dropout(annotations, training=training)
        return annotations, mask, summary

    def _annotate(self, source_ids, training):
        mask = tf.not_equal(source_ids, PAD_ID)
        embedded = self.embedding(source_ids)
        if self.embedding_dropout is not None:
            embedded = self.embedding_dropout(embedded, training=training)
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        recurrence = default_recurrence() if self.recurrence == "auto" else self.recurrence
        if recurrence == "keras":
            return self._keras_recurrence(embedded, mask, lengths, training)
        cells = [self.forward_rnn.cell]
        inputs = [embedded]
        if self.backward_rnn is not None:
            # The backward GRU reads each sentence from its last real token, so its
            # padding stays at the end, where the mask freezes the state.
            cells.append(self.backward_rnn.cell)
            inputs.append(tf.reverse_sequence(embedded, lengths, seq_axis=1, batch_axis=0))
        states = _recur(cells, inputs, mask, self.reset_after)  # [D, B, Tx, n]
        # A frozen state after a sentence's end is the one after its last real token.
        summaries = states[:, :, -1]
        if self.backward_rnn is None:
            return states[0], mask, summaries[0]
        backward = tf.reverse_sequence(states[1], lengths, seq_axis=1, batch_axis=0)
        return tf.concat([states[0], backward], axis=-1), mask, summaries[1]

    def _keras_recurrence(self, embedded, mask, lengths, training):
        """The Keras GRU layers' own calls (cuDNN on a GPU); the backward one reads each
        sentence reversed by its length, so its padding stays at the end as cuDNN needs.
        Padded positions of the annotations differ from the fused loop's; nothing reads
        them (attention masks them)."""
        forward, forward_last = self.forward_rnn(embedded, mask=mask, training=training)
        if self.backward_rnn is None:
            return forward, mask, forward_last
        reversed_input = tf.reverse_sequence(embedded, lengths, seq_axis=1, batch_axis=0)
        backward, backward_last = self.backward_rnn(reversed_input, mask=mask, training=training)
        backward = tf.reverse_sequence(backward, lengths, seq_axis=1, batch_axis=0)
        return tf.concat([forward, backward], axis=-1), mask, backward_last

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "bidirectional": self.bidirectional,
            "reset_after": self.reset_after,
            "recurrence": self.recurrence,
            "dropout": self.dropout,
            "init": self.init,
        }


def _recur(cells, inputs, mask, reset_after: bool):
    """Run one GRU per direction over its inputs [B, T, m], all directions in the same
    loop: the input projections of every position are one matmul per direction before
    the loop, and each step is one batched recurrent matmul for all directions (two
    with the paper's reset-before gate). The arithmetic is Keras's GRU cell (weights in
    its layout, h = z o h_prev + (1 - z) o h~), so the layers' weights are used as they
    are. Padded steps (``mask`` False) keep the previous state. Returns [D, B, T, n]."""
    n = cells[0].units
    if reset_after:
        biases = [tf.unstack(tf.convert_to_tensor(cell.bias)) for cell in cells]
    else:
        biases = [(tf.convert_to_tensor(cell.bias), None) for cell in cells]
    projected = tf.stack([
        apply_kernel(x, cell.kernel) + input_bias for x, cell, (input_bias, _) in zip(inputs, cells, biases)
    ])  # [D, B, T, 3n]
    recurrent = tf.stack([tf.convert_to_tensor(cell.recurrent_kernel) for cell in cells])  # [D, n, 3n]
    kernels = gru.recurrent_kernels(recurrent, n, reset_after)
    recurrent_bias = tf.stack([b for _, b in biases])[:, None, :] if reset_after else None

    def step(state, slices):
        x, keep = slices  # [D, B, 3n], [1, B, 1]
        z, candidate = gru.gates(x, state, kernels, recurrent_bias)
        return tf.where(keep, z * state + (1.0 - z) * candidate, state)

    keep = tf.transpose(mask)[:, None, :, None]  # [T, 1, B, 1]
    initial = tf.zeros([len(cells), tf.shape(mask)[0], n], projected.dtype)
    states = tf.scan(step, (tf.transpose(projected, [2, 0, 1, 3]), keep), initializer=initial)
    return tf.transpose(states, [1, 2, 0, 3])
