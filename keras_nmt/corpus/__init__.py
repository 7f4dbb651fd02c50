"""Corpora: reading parallel files (``readers``), the development split's two halves
(``heldout``), the built-in generator (``builtin``) and the paper's WMT'14 recipe
(``wmt14``).

Import the module you need: this package imports none of them, so that reading a line
of input (the ONNX path, the server) does not load the corpus generator.
"""
