"""Text <-> ids, by tokenizer kind: the first stage of text -> tokens -> batches.

- :mod:`~keras_nmt.text.word`: the paper's word tokenizer (rewrite rules, Python) and
  its codec; :mod:`~keras_nmt.text.word_graph`: the same rules as TensorFlow graph ops.
- :mod:`~keras_nmt.text.sentencepiece`: SentencePiece training and codec (Python);
  :mod:`~keras_nmt.text.sentencepiece_graph`: the same model in graphs (TF Text).
- :mod:`~keras_nmt.text.codecs`: the one factory that gives a run's codecs, Python or
  graph, from its tokenizer kind.
- :mod:`~keras_nmt.text.sentences`: splitting a line into its sentences (rules per
  language, Python) and joining their translations; :mod:`~keras_nmt.text.sentences_graph`:
  the same rules and join as TensorFlow graph ops.

Importing this package, ``word``, ``sentences``, ``sentencepiece`` or ``codecs`` loads no TensorFlow:
the onnxruntime path runs on them alone. The ``*_graph`` modules import it.
"""
