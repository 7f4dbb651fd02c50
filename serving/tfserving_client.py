#!/usr/bin/env python
"""``python serving/tfserving_client.py --url http://localhost:8501 < in.txt``: the same as
``keras-nmt tfserving-client``, translating through a running TensorFlow Serving."""

import sys

from keras_nmt.cli.tfserving_client import main

if __name__ == "__main__":
    sys.exit(main(prog="tfserving_client"))
