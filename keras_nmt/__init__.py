"""keras-nmt: RNNsearch and RNNencdec (Bahdanau, Cho & Bengio, 2015) in Keras 3.

The package's layers live in its folders (docs/architecture.md). Its models are written
for Keras's TensorFlow backend: unless Keras is imported already, importing the package
makes that the backend of this process, whatever ``KERAS_BACKEND`` the shell holds.
"""

import os as _os
import sys as _sys

if "keras" not in _sys.modules:
    _os.environ["KERAS_BACKEND"] = "tensorflow"

__version__ = "0.1.0"
