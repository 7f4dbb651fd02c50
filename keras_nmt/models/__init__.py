"""The translation model (RNNsearch and RNNencdec) and its NLL."""
