#!/usr/bin/env python
"""``python serving/onnx_translate.py EXPORT_DIR < in.txt``: the same as
``keras-nmt onnx-translate``, translating with onnxruntime and no TensorFlow."""

import sys

from keras_nmt.cli.onnx_translate import main

if __name__ == "__main__":
    sys.exit(main(prog="onnx_translate"))
