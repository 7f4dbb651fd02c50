"""Batched beam search as one graph, the same on every path: Keras, SavedModel and ONNX.

- :mod:`~keras_nmt.search.beam`: the search loop (greedy decoding is a beam of one);
- :mod:`~keras_nmt.search.state`: the loop's state, named;
- :mod:`~keras_nmt.search.strategies`: how the plain, prefixed and constrained searches
  score and choose their candidates;
- :mod:`~keras_nmt.search.constrained` and :mod:`~keras_nmt.search.prefix`: phrases to
  include and avoid, and a prefix to start with;
- :mod:`~keras_nmt.search.compiled`: the search as a traced function with a fixed
  signature, optionally XLA-compiled (what the Translator and the exports run);
- :mod:`~keras_nmt.search.lengths`: how many tokens a sentence may generate;
- :mod:`~keras_nmt.search.shortlist`: vocabulary selection, the words a batch is scored on;
- :mod:`~keras_nmt.search.candidates`: the best extensions of every hypothesis;
- :mod:`~keras_nmt.search.top_k`: the two-stage top-k over a whole vocabulary.
"""

from keras_nmt.search.beam import beam_search, greedy_search
from keras_nmt.search.compiled import make_translate_fn, rare_apart
from keras_nmt.search.lengths import decode_limits
from keras_nmt.search.shortlist import Shortlist, output_columns

__all__ = [
    "Shortlist",
    "beam_search",
    "decode_limits",
    "greedy_search",
    "make_translate_fn",
    "output_columns",
    "rare_apart",
]
