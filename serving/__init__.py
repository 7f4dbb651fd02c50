"""Serving an exported model: a TF Serving client and an onnxruntime translator."""
