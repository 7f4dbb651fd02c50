"""RNNsearch and RNNencdec as one Keras model built from a :class:`Config`."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.config import Config
from keras_nmt.layers import Decoder, Encoder
from keras_nmt.constants import PAD_ID


@keras.saving.register_keras_serializable(package="keras_nmt")
class TranslationModel(keras.Model):
    """Encoder + decoder. ``config.architecture`` picks the paper's model:

    - ``search``: bidirectional encoder, attention, s_0 = tanh(W_s h<-_1);
    - ``encdec``: forward encoder, c_i fixed to h->_Tx, s_0 = tanh(W_s h->_Tx).

    ``call`` is teacher forcing for training; :meth:`encode` and :meth:`step` are the
    pieces a search algorithm drives one target word at a time.
    """

    def __init__(self, config: Config | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = Config.from_dict(config)
        self.config = config
        self.encoder = Encoder(
            config.src_vocab_size,
            config.embedding,
            config.hidden,
            bidirectional=config.uses_attention,
            reset_after=config.reset_after,
            name="encoder",
        )
        self.decoder = Decoder(
            config.tgt_vocab_size,
            config.embedding,
            config.hidden,
            config.attention,
            config.maxout,
            use_attention=config.uses_attention,
            reset_after=config.reset_after,
            name="decoder",
        )
        self.build((None, None))

    def build(self, input_shape=None):
        self.encoder.build((None, None))
        self.decoder.build(self.encoder.output_dim, self.config.hidden)
        self.built = True

    def encode(self, source_ids, training=False):
        """Source ids [B, Tx] -> (s_0 [B, n], memory dict for :meth:`step`)."""
        annotations, mask, summary = self.encoder(source_ids, training=training)
        return self.decoder.start(annotations, mask, summary)

    def step(self, previous_ids, state, memory):
        """(y_(i-1) [B], s_(i-1), memory) -> (logits [B, V], s_i, attention [B, Tx])."""
        return self.decoder.step(previous_ids, state, memory)

    def call(self, inputs, training=False):
        """(source ids [B, Tx], target input ids [B, T]) -> logits [B, T, V]."""
        logits, _ = self.forced(inputs[0], inputs[1], training=training)
        return logits

    def forced(self, source_ids, target_in, training=False):
        """Teacher forcing that also returns the attention weights [B, T, Tx]."""
        state, memory = self.encode(source_ids, training=training)
        return self.decoder(target_in, state, memory)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def sentence_nll(logits, targets):
    """Per-sentence negative log-likelihood [B]: summed over target tokens, padding
    (id 0) masked. The paper's training cost and its Table 2 figure. Computed in
    float32 whatever the logits' dtype (mixed precision): a float16 softmax over 30,000
    words loses the small probabilities."""
    logits = tf.cast(logits, tf.float32)
    mask = tf.cast(tf.not_equal(targets, PAD_ID), tf.float32)
    token_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    return tf.reduce_sum(token_nll * mask, axis=1)
