#!/usr/bin/env python
"""Train an RNNsearch or RNNencdec model: ``python train.py --variant search50``.

The same as ``keras-nmt train``. With no --data, trains on the built-in corpus
(generated, no download) with compact dimensions, then prints held-out BLEU and the
run directory.
"""

from keras_nmt.cli import run_command

if __name__ == "__main__":
    raise SystemExit(run_command("train", None, prog="train.py"))
