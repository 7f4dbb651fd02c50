"""Serving an exported model: an onnxruntime translator (no TensorFlow), an HTTP
translation server on it, and a TF Serving client. Their command lines are
``keras-nmt onnx-translate``, ``keras-nmt serve`` and ``keras-nmt tfserving-client``;
``serving/`` at the top of the repository holds the first and last as scripts.

:class:`RequestError` is the server's one error class for what a request asks wrongly
(:mod:`keras_nmt.serving.server`)."""


class RequestError(Exception):
    """A request the server refuses: an HTTP status and a one-line reason, answered as
    TF Serving answers errors, ``{"error": REASON}``."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason
