"""Export a trained run for serving: a TF Serving SavedModel and, optionally, ONNX.

``python -m export RUN_DIR --out EXPORT_DIR``; see :mod:`export.cli`.
"""
