"""Model building blocks: encoder, attention, decoder cell, maxout readout, decoder."""

from keras_nmt.layers.attention import AdditiveAttention
from keras_nmt.layers.decoder import Decoder
from keras_nmt.layers.conditional_gru import ConditionalGRUCell
from keras_nmt.layers.encoder import Encoder
from keras_nmt.layers.readout import MaxoutReadout

__all__ = ["AdditiveAttention", "ConditionalGRUCell", "Decoder", "Encoder", "MaxoutReadout"]
