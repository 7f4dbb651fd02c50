"""Serving an exported model: an onnxruntime translator (no TensorFlow), an HTTP
translation server on it, and a TF Serving client. Their command lines are
``keras-nmt onnx-translate``, ``keras-nmt serve`` and ``keras-nmt tfserving-client``;
``serving/`` at the top of the repository holds the first and last as scripts.

The server refuses a request with :class:`keras_nmt.core.errors.RequestError`, its one error
class for what a request asks wrongly (:mod:`keras_nmt.serving.server`)."""
