"""``keras-nmt``: one command line, a subcommand a task.

    keras-nmt train          train RNNsearch / RNNencdec (also: python train.py)
    keras-nmt translate      translate stdin with trained runs (ensembles, n-best)
    keras-nmt evaluate       BLEU / chrF, No-UNK, Fig. 2, Fig. 3, Table 2, AER
    keras-nmt score          log-probability of given translations (force decoding)
    keras-nmt average        average a run's last or best N checkpoints
    keras-nmt lexicon        build a run's lexical table p(t|s) for vocabulary selection
    keras-nmt export         SavedModel for TF Serving, and ONNX (also: python -m export)
    keras-nmt onnx-translate translate stdin with onnxruntime, without TensorFlow
    keras-nmt serve          an HTTP translation server on onnxruntime (TF Serving's REST API)
    keras-nmt tfserving-client  translate stdin through a running TF Serving
    keras-nmt web            a folder that translates in the browser and in Node.js
    keras-nmt wmt14          download and prepare the paper's WMT'14 corpus

Each subcommand is a module of this package with ``main(argv, ...) -> exit status``;
importing this package loads no TensorFlow.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

# name -> (module, one line for --help)
COMMANDS = {
    "train": ("train", "train RNNsearch / RNNencdec on a corpus (python train.py is the same)"),
    "translate": ("translate", "translate stdin with one or more trained runs"),
    "evaluate": ("evaluate", "BLEU/chrF (All, No-UNK), BLEU by length, heat maps, Table 2, AER"),
    "score": ("score", "log-probability (and alignment) of given translations under a model"),
    "average": ("average", "average a run's last or best N checkpoints (--weights averaged)"),
    "lexicon": ("lexicon", "build a run's lexical table p(t|s), for --shortlist F,B"),
    "export": ("export", "export a run as a TF Serving SavedModel (and ONNX with --onnx)"),
    "onnx-translate": ("onnx_translate", "translate stdin with an ONNX export and onnxruntime"),
    "serve": ("serve", "serve an ONNX export over HTTP (TF Serving's REST API), no TensorFlow"),
    "tfserving-client": ("tfserving_client", "translate stdin through a running TF Serving"),
    "web": ("web", "a static folder that translates in the browser and in Node.js, offline"),
    "wmt14": ("wmt14", "download, check and prepare the paper's WMT'14 English-French corpus"),
}
PROG = "keras-nmt"
# What the plain install (the ONNX path) lacks: the packages of the [train] extra.
TRAINING_PACKAGES = {"tensorflow", "keras", "tensorflow_text", "tf2onnx", "onnx", "sacrebleu",
                     "matplotlib", "tensorboard", "tensorflow_serving", "psutil"}


def run_command(module_name: str, argv: Sequence[str] | None, prog: str) -> int:
    """``keras_nmt.cli.MODULE.main(argv, prog=prog)``; on the plain install, a command that
    needs the training packages stops with a one-line error that says how to get them."""
    try:
        module = importlib.import_module(f"keras_nmt.cli.{module_name}")
        return module.main(argv, prog=prog)
    except ModuleNotFoundError as error:
        package = (error.name or "").split(".")[0]
        if package not in TRAINING_PACKAGES:
            raise
        print(f"{prog}: error: this command needs the training install ({package} is not "
              "installed): python -m pip install 'keras-nmt[train]'", file=sys.stderr)
        return 2


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items())
    return (f"usage: {PROG} COMMAND [ARGS ...]\n\n"
            "RNNsearch and RNNencdec (Bahdanau, Cho & Bengio, 2015): train, translate, evaluate,\n"
            f"export, serve.\n\ncommands:\n{rows}\n\n"
            f"'{PROG} COMMAND --help' describes one.\n")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    if not argv:  # a usage error, as argparse reports one: on stderr, status 2
        sys.stderr.write(usage())
        print(f"{PROG}: error: a command is required", file=sys.stderr)
        return 2
    if argv[0] == "--version":
        from keras_nmt import __version__

        print(f"{PROG} {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"{PROG}: error: unknown command {name!r}; commands: {', '.join(COMMANDS)} "
              "(see --help)", file=sys.stderr)
        return 2
    return run_command(COMMANDS[name][0], rest, prog=f"{PROG} {name}")
