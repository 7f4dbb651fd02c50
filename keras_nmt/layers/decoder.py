"""The decoder: previous word, state and context -> next-word logits (A.2.2)."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_nmt.layers import initializers
from keras_nmt.layers.attention import AdditiveAttention
from keras_nmt.layers.row_layout import hypotheses_per_sentence, tile_rows
from keras_nmt.layers.conditional_gru import ConditionalGRUCell
from keras_nmt.layers.linear import apply_kernel
from keras_nmt.layers.readout import MaxoutReadout


@keras.saving.register_keras_serializable(package="keras_nmt")
class Decoder(keras.layers.Layer):
    """RNNsearch's decoder, or RNNencdec's when ``use_attention`` is False.

    With attention the context c_i is recomputed from s_(i-1) at every step; without
    it c_i is fixed to the encoder's summary h->_Tx, as A.2.2 describes the baseline.
    Everything about the source that a step needs is computed once by :meth:`start`
    and handed around as a ``memory`` dict, one row per sentence, which a beam's
    hypotheses share (:mod:`keras_nmt.layers.row_layout`).
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        units: int,
        attention_units: int,
        maxout_units: int,
        use_attention: bool = True,
        reset_after: bool = False,
        dropout: float = 0.0,
        init: str = "paper",
        embedding: keras.layers.Embedding | None = None,
        **kwargs,
    ):
        """``embedding``: a layer to read the previous word with instead of one of its
        own, the encoder's when the model ties them (one vocabulary for both sides); a
        layer made from :meth:`get_config` has its own."""
        super().__init__(**kwargs)
        self.dropout = dropout
        self.init = initializers.check_scheme(init)
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.attention_units = attention_units
        self.maxout_units = maxout_units
        self.use_attention = use_attention
        self.reset_after = reset_after
        policy = self.dtype_policy  # the model's, handed to every sublayer
        if embedding is not None and (embedding.input_dim, embedding.output_dim) != (
                vocab_size, embedding_dim):
            raise ValueError(f"a shared embedding must be {vocab_size} x {embedding_dim}, got "
                             f"{embedding.input_dim} x {embedding.output_dim}")
        self.embedding = embedding or keras.layers.Embedding(
            vocab_size, embedding_dim, embeddings_initializer=initializers.weight(init),
            name="embedding", dtype=policy,
        )
        self.cell = ConditionalGRUCell(units, reset_after=reset_after, init=init, name="cell",
                                       dtype=policy)
        self.attention = (AdditiveAttention(attention_units, init=init, name="attention",
                                            dtype=policy)
                          if use_attention else None)
        self.readout = MaxoutReadout(maxout_units, vocab_size, init=init, name="readout",
                                     dtype=policy)
        # On the target embeddings and the maxout layer, in training only (beyond the paper).
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=policy) if dropout else None
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy) if dropout else None

    def build(self, annotation_dim: int, summary_dim: int):
        annotation_dim, summary_dim = int(annotation_dim), int(summary_dim)
        context_dim = annotation_dim if self.use_attention else summary_dim
        if not self.embedding.built:  # a shared one is built by its owner
            self.embedding.build((None, None))
        self.cell.build(self.embedding_dim, context_dim)
        if self.attention is not None:
            self.attention.build((None, self.units), (None, None, annotation_dim))
        self.readout.build(self.units, self.embedding_dim, context_dim)
        self.init_kernel = self.add_weight(  # W_s
            name="init_kernel", shape=(summary_dim, self.units),
            initializer=initializers.weight(self.init),
        )
        self.init_bias = self.add_weight(name="init_bias", shape=(self.units,), initializer="zeros")
        self.built = True

    def start(self, annotations, mask, summary, stepwise=False):
        """(s_0, memory) for a batch of encoded sentences: for teacher forcing (:meth:`call`),
        or ``stepwise`` for :meth:`step`.

        A step uses the context c_i only through C c_i (the GRU's gates) and C_o c_i (the
        deep output), both linear in c_i = sum_j alpha_ij h_j. So a search's memory holds
        C h_j and C_o h_j for every source position ("values"), computed once per
        sentence, and a step weights them by alpha_i: Tx * (3n + 2l) products per
        hypothesis instead of 2n * (3n + 2l), the largest matrix products of a step."""
        state = tf.tanh(tf.matmul(summary, self.init_kernel) + self.init_bias)
        if self.use_attention:
            keys = self.attention.precompute_keys(annotations)
            if stepwise:
                values = apply_kernel(annotations, self._context_kernels())
                return state, {"keys": keys, "values": values, "mask": mask}
            return state, {"annotations": annotations, "keys": keys, "mask": mask}
        context_projection = self.cell.project_context(summary)
        if stepwise:
            return state, {"context_projection": context_projection,
                           "readout_context": self.readout.project_context(summary), "mask": mask}
        return state, {"context": summary, "context_projection": context_projection, "mask": mask}

    def _context_kernels(self):
        """[C | C_o]: [2n, 3n + 2l], the context's two projections side by side."""
        return tf.concat([self.cell.context_kernel, self.readout.context_kernel], axis=1)

    def _context(self, state, memory):
        if self.use_attention:
            context, weights = self.attention(
                state, memory["keys"], memory["annotations"], memory["mask"]
            )
            return context, self.cell.project_context(context), weights
        weights = tf.zeros(tf.shape(memory["mask"]), dtype=state.dtype)
        return memory["context"], memory["context_projection"], weights

    def step(self, previous_ids, state, memory, projection=None):
        """One decoding step: y_(i-1) [B] and s_(i-1) [B, n] -> (logits_i, s_i, alpha_i);
        the logits over the columns of ``projection`` (``readout.columns``) when given.
        ``memory`` is :meth:`start`'s ``stepwise`` one, with a row per sentence: B may be
        a multiple of its rows, the hypotheses of a beam laid out as
        :mod:`keras_nmt.layers.row_layout` says."""
        embedded = self.embedding(previous_ids)
        if self.use_attention:
            projected, weights = self.attention(
                state, memory["keys"], memory["values"], memory["mask"]
            )
            cell_context = projected[:, : 3 * self.units]
            readout_context = projected[:, 3 * self.units:]
        else:
            rows = tf.shape(state)[0]
            beam = hypotheses_per_sentence(rows, tf.shape(memory["mask"])[0])
            cell_context = tile_rows(memory["context_projection"], beam)
            readout_context = tile_rows(memory["readout_context"], beam)
            weights = tf.zeros([rows, tf.shape(memory["mask"])[1]], dtype=state.dtype)
        hidden = self.readout.hidden(state, embedded, projected_context=readout_context)
        logits = self.readout.project(hidden, projection)
        new_state = self.cell(self.cell.project_inputs(embedded), cell_context, state)
        return logits, new_state, weights

    def call(self, target_in, state, memory, hidden_only=False, training=False):
        """Teacher forcing over whole target sequences: [B, T] -> (logits [B, T, V],
        attention weights [B, T, Tx]). Only the recurrence runs step by step; the word
        projections before it and the deep output after it see the whole sequence.
        ``hidden_only``: the maxout layer t [B, T, l] instead of the logits (a sampled
        softmax projects it on a few output columns only)."""
        embedded = self.embedding(target_in)
        if self.embedding_dropout is not None:
            embedded = self.embedding_dropout(embedded, training=training)
        projected_inputs = tf.transpose(self.cell.project_inputs(embedded), [1, 0, 2])
        kernels = self.cell.recurrent_kernels()

        def recur(carry, projected_input):
            previous_state = carry[0]
            context, projected_context, weights = self._context(previous_state, memory)
            new_state = self.cell(projected_input, projected_context, previous_state, kernels=kernels)
            return new_state, context, weights

        batch = tf.shape(state)[0]
        context_dim = self.readout.context_kernel.shape[0]
        initial = (
            state,
            tf.zeros([batch, context_dim], state.dtype),
            tf.zeros(tf.shape(memory["mask"]), state.dtype),
        )
        states, contexts, weights = tf.scan(recur, projected_inputs, initializer=initial)
        # The readout of step i uses s_(i-1): shift the states right by one.
        previous_states = tf.concat([state[None], states[:-1]], axis=0)
        hidden = self.readout.hidden(
            tf.transpose(previous_states, [1, 0, 2]),
            embedded,
            tf.transpose(contexts, [1, 0, 2]),
        )
        if self.output_dropout is not None:
            hidden = self.output_dropout(hidden, training=training)
        outputs = hidden if hidden_only else self.readout.project(hidden)
        return outputs, tf.transpose(weights, [1, 0, 2])

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "attention_units": self.attention_units,
            "maxout_units": self.maxout_units,
            "use_attention": self.use_attention,
            "reset_after": self.reset_after,
            "dropout": self.dropout,
            "init": self.init,
        }
