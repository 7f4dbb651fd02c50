"""Exporting a trained run: a TF Serving SavedModel and an ONNX model, each checked.

- :mod:`~keras_nmt.export.exporter`: the whole export (what ``keras-nmt export`` runs);
- :mod:`~keras_nmt.export.savedmodel`: the SavedModel's signatures;
- :mod:`~keras_nmt.export.onnx_conversion`: the id-in / id-out search as ONNX (tf2onnx);
- :mod:`~keras_nmt.export.loaders`: loading a SavedModel both ways (TF2, the TF1 session);
- :mod:`~keras_nmt.export.parity`: comparing two paths' translations;
- :mod:`~keras_nmt.export.serving_files`: ``models.config`` and ``SERVING.md``.
- :mod:`~keras_nmt.export.layout`: where an export's files lie (read without TensorFlow).

Importing this package loads no TensorFlow: the onnxruntime path
(:mod:`keras_nmt.decoding.onnx_translator`), which reads exports, imports it.
"""


# The ``alpha`` input of the ``translate`` signature (SavedModel, and keras-nmt serve's
# mirror of it) below 0: the alpha fixed at export (the run's tuned one, else its
# config's), so that a client can change the beam and keep the export's alpha.
EXPORT_ALPHA = -1.0
