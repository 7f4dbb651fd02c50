"""keras-nmt: RNNsearch and RNNencdec (Bahdanau, Cho & Bengio, 2015) in Keras 3."""

__version__ = "0.1.0"
