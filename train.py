#!/usr/bin/env python
"""Train an RNNsearch or RNNencdec model: ``python train.py --variant search50``.

The same as ``keras-nmt train``. With no --data, trains on the built-in corpus
(generated, no download) with compact dimensions, then prints held-out BLEU and the
run directory.
"""

from keras_nmt.cli.train import main

if __name__ == "__main__":
    raise SystemExit(main(prog="train.py"))
