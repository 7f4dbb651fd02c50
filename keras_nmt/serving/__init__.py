"""Serving an exported model: an onnxruntime translator (no TensorFlow) and a TF Serving
client. Their command lines are ``keras-nmt onnx-translate`` and
``keras-nmt tfserving-client``; ``serving/`` at the top of the repository holds the
same two as scripts."""
