"""The source encoder: word embeddings and a (bi)directional GRU (paper, A.2.1)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import initializers


@keras.saving.register_keras_serializable(package="keras_nmt")
class Encoder(keras.layers.Layer):
    """Source ids -> annotations h_j and the summary vector that starts the decoder.

    Bidirectional (RNNsearch): h_j = [h->_j ; h<-_j] and the summary is h<-_1, the
    backward state after reading the whole sentence. Unidirectional (RNNencdec): h_j =
    h->_j and the summary is h->_Tx, the fixed context c of the encoder-decoder.
    Padding (id 0) is masked, so a sentence encodes the same whatever batch it is in.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        units: int,
        bidirectional: bool = True,
        reset_after: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.bidirectional = bidirectional
        self.reset_after = reset_after
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, embeddings_initializer=initializers.weight(), name="embedding"
        )
        self.forward_rnn = self._gru("forward_gru", go_backwards=False)
        self.backward_rnn = self._gru("backward_gru", go_backwards=True) if bidirectional else None

    def _gru(self, name: str, go_backwards: bool) -> keras.layers.GRU:
        return keras.layers.GRU(
            self.units,
            return_sequences=True,
            return_state=True,
            go_backwards=go_backwards,
            reset_after=self.reset_after,
            kernel_initializer=initializers.weight(),
            recurrent_initializer=initializers.recurrent(),
            bias_initializer="zeros",
            name=name,
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
        mask = tf.not_equal(source_ids, 0)
        embedded = self.embedding(source_ids)
        forward, forward_last = self.forward_rnn(embedded, mask=mask, training=training)
        if self.backward_rnn is None:
            return forward, mask, forward_last
        backward, backward_last = self.backward_rnn(embedded, mask=mask, training=training)
        backward = tf.reverse(backward, axis=[1])  # go_backwards yields time reversed
        return tf.concat([forward, backward], axis=-1), mask, backward_last

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "bidirectional": self.bidirectional,
            "reset_after": self.reset_after,
        }
