"""The ``translate_ids`` function as an ONNX model (tf2onnx), for onnxruntime.

String ops, lookup tables and tensorflow_text's SentencePiece ops do not convert to ONNX,
so the ONNX model is the id-in / id-out beam search; the onnxruntime path encodes and
decodes in Python (:mod:`keras_nmt.text` codecs: the word tokenizer, or the run's SentencePiece
models) with the vocabularies (and models) written next to it and the settings of
``NAME.onnx.json``. Beside it, :func:`convert_forced` writes the force-decoding model
(``NAME.forced.onnx``: given source and target ids, each target token's log-probability
and the attention weights), which the search model cannot give.

A conversion holds gigabytes that TensorFlow and tf2onnx do not give back (traced graphs,
tf2onnx's copies): :func:`convert_apart` runs one in a process of its own, which loads
the run's model again and returns the memory when it ends.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
import os
import pathlib

import tensorflow as tf

from keras_nmt.export import onnx_rewrites
from keras_nmt.export.savedmodel import ID_OUTPUTS, translate_ids_function
from keras_nmt.models.rnnsearch import TranslationModel

OPSET = 17


def convert(model: TranslationModel, nbest: int, path: str | pathlib.Path, opset: int = OPSET,
            lexicon_table=None, attention: bool = False, constrained: bool = False):
    """Convert and write ``path``; returns the checked ONNX ModelProto. With
    ``lexicon_table`` the graph holds it and takes the two shortlist inputs; with
    ``attention`` it also returns each hypothesis's attention (``attention`` [B, n, T, S],
    what UNK replacement reads); with ``constrained``, the constrained search
    (``translate_ids_constrained``: inputs ``include_ids``, ``avoid_ids``, ``prefix_ids``
    after the others, output ``unmet``)."""
    fn, signature = translate_ids_function(model, nbest, lexicon_table, attention, constrained)
    return _convert(fn, signature, path, opset)


# The force-decoding model's inputs: ids with EOS, padded with PAD (0).
FORCED_SIGNATURE = (tf.TensorSpec([None, None], tf.int32, name="source_ids"),
                    tf.TensorSpec([None, None], tf.int32, name="target_ids"))


def convert_forced(model: TranslationModel, path: str | pathlib.Path, opset: int = OPSET):
    """Convert :func:`keras_nmt.evaluation.forced.stepwise_forced` and write ``path``
    (inputs ``source_ids`` [B, S], ``target_ids`` [B, T]; outputs ``token_logprobs``
    [B, T] and, for RNNsearch, ``attention`` [B, T, S]); returns the checked ModelProto."""
    from keras_nmt.evaluation.forced import stepwise_forced

    def forced_ids(source_ids, target_ids):
        return stepwise_forced(model, source_ids, target_ids)

    return _convert(forced_ids, list(FORCED_SIGNATURE), path, opset)


# tf2onnx copies the whole graph before each of its optimizer passes, to roll back a pass
# that fails: 14% of an export's time. It skips the copies when this variable is set
# (1.17 reads only whether it is; "false" also says so should it read the value).
_NO_ROLLBACK = "TF2ONNX_CATCH_ERRORS"


def _convert(fn, signature, path, opset):
    import onnx
    import tf2onnx

    function = tf.function(fn, input_signature=signature, autograph=False)
    proto = _without_rollback(lambda: tf2onnx.convert.from_function(
        function, input_signature=signature, opset=opset)[0])
    onnx_rewrites.tidy(proto)  # the loop's weights read from outside it, not carried
    onnx.checker.check_model(proto)
    onnx.save_model(proto, str(path))
    return proto


def _without_rollback(convert):
    """``convert()`` with tf2onnx's rollback copies off, unless the user's environment says
    otherwise; if a pass then fails, with nothing to roll back to, ``convert()`` again as
    tf2onnx does by default."""
    if _NO_ROLLBACK in os.environ:  # the user's own choice
        return convert()
    try:
        with _environment(_NO_ROLLBACK, "false"):
            return convert()
    except Exception:  # noqa: BLE001 (any failing pass: the default conversion decides)
        return convert()


@contextlib.contextmanager
def _environment(name: str, value: str):
    """``name`` set to ``value`` in os.environ for the block, then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@dataclasses.dataclass(frozen=True)
class Conversion:
    """One conversion to run apart (:func:`convert_apart`): the run and weights its model
    comes from, the file to write, and :func:`convert`'s settings (``force_decoding``: the
    force-decoding model, :func:`convert_forced`)."""

    run_dir: str
    weights: str
    path: str
    force_decoding: bool = False
    nbest: int = 1
    shortlist: bool = False  # the run's lexical table in the graph
    attention: bool = False
    constrained: bool = False


def convert_apart(conversion: Conversion) -> tuple[list[str], list[str]]:
    """``conversion`` in a fresh process (spawned: nothing of this one's TensorFlow state
    is shared); the written model's input and output names. Its errors are raised here;
    a process that dies (killed for memory, say) raises ``BrokenProcessPool``. Cost: the
    conversion's time, plus a TensorFlow start and a model load (seconds)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(_convert_run, conversion).result()


def _convert_run(conversion: Conversion) -> tuple[list[str], list[str]]:
    """In the child: the run's model loaded in float32 (as the export's), converted."""
    from keras_nmt.rundir.run_directory import RunDir

    run = RunDir(conversion.run_dir).inspect(conversion.weights)
    model = run.run.load_model(files=run, precision="float32")
    if conversion.force_decoding:
        proto = convert_forced(model, conversion.path)
    else:
        table = run.run.load_lexicon().selection_table() if conversion.shortlist else None
        proto = convert(model, conversion.nbest, conversion.path, lexicon_table=table,
                        attention=conversion.attention, constrained=conversion.constrained)
    return input_names(proto), output_names(proto)


def input_names(proto) -> list[str]:
    return [i.name for i in proto.graph.input]


def output_names(proto) -> list[str]:
    return [o.name for o in proto.graph.output]


class OnnxModel:
    """An onnxruntime session run like :class:`keras_nmt.export.loaders.TF2Model` (numpy in and out)."""

    def __init__(self, path: str | pathlib.Path):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        self.session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self.outputs = [o.name for o in self.session.get_outputs()]

    def run(self, feeds) -> dict:
        return dict(zip(self.outputs, self.session.run(None, dict(feeds))))


__all__ = ["FORCED_SIGNATURE", "ID_OUTPUTS", "OPSET", "OnnxModel", "convert", "convert_forced",
           "input_names", "output_names"]
