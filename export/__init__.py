"""``python -m export RUN_DIR --out EXPORT_DIR [--onnx]``: the same as ``keras-nmt export``.

Where a user goes to export a run; the code is :mod:`keras_nmt.export` and
:mod:`keras_nmt.cli.export`.
"""
