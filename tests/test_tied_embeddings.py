"""``tie_embeddings``: with one SentencePiece vocabulary for both sides, the encoder and the
decoder read words through one matrix. The model, its checkpoints, and a tied run through
every path a user takes: train, resume, translate, evaluate, average, export (SavedModel
with selection, ONNX, int8)."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.rundir import model_weights
from keras_nmt.core.config import variant_config
from keras_nmt.core.errors import CheckpointMismatchError, ConfigError
from keras_nmt.layers import Decoder
from keras_nmt.models.rnnsearch import TranslationModel
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.decoding.onnx_translator import OnnxTranslator
from keras_nmt.serving.registry import Registry
from keras_nmt.decoding.keras_translator import Translator
from support import (
    ROOT, TINY_SETTINGS, ServerThread, check_selecting_export, onnx_files, run_logged, tiny_args,
)

VOCAB = 20
PIECES = 150
SELECTING_BEAM, SHORTLIST = 3, (5, 2)


def _config(**changes):
    dims = {key: TINY_SETTINGS[key] for key in ("embedding", "hidden", "attention", "maxout")}
    return variant_config("search30", {**dims, "src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB,
                                       "tie_embeddings": True, **changes})


def _embedding_gradient(model, source, target_in):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model((tf.constant(source), tf.constant(target_in))) ** 2)
    return tf.convert_to_tensor(tape.gradient(loss, model.encoder.embedding.embeddings)).numpy()


def test_the_encoder_and_the_decoder_read_through_one_matrix():
    tied, untied = TranslationModel(_config()), TranslationModel(_config(tie_embeddings=False))
    assert tied.encoder.embedding is tied.decoder.embedding
    assert len(tied.weights) == len(untied.weights) - 1
    size = lambda model: sum(int(np.prod(w.shape)) for w in model.weights)  # noqa: E731
    assert size(untied) - size(tied) == VOCAB * TINY_SETTINGS["embedding"]
    # Piece 5 only in the source, piece 6 only in the decoder's input: both rows train.
    source, target_in = [[5, 4, 3]], [[2, 6, 7]]
    gradient = _embedding_gradient(tied, source, target_in)
    assert np.abs(gradient[5]).sum() > 0 and np.abs(gradient[6]).sum() > 0
    assert np.abs(gradient[9]).sum() == 0
    # Untied, the encoder's matrix never sees the target's piece.
    assert np.abs(_embedding_gradient(untied, source, target_in)[6]).sum() == 0


def test_tied_embeddings_need_one_vocabulary():
    with pytest.raises(ConfigError, match="tie_embeddings needs one vocabulary for both sides"):
        _config(tgt_vocab_size=VOCAB + 1)
    embedding = TranslationModel(_config()).encoder.embedding
    with pytest.raises(ValueError, match="a shared embedding must be 21 x 16, got 20 x 16"):
        Decoder(VOCAB + 1, 16, 16, 16, 8, embedding=embedding)


def test_a_tied_model_refuses_an_untied_checkpoint(tmp_path):
    tied, untied = TranslationModel(_config()), TranslationModel(_config(tie_embeddings=False))
    path = tf.train.Checkpoint(model=untied).write(str(tmp_path / "untied"))
    # Every path the tied model restores has a value of the right shape, but two values
    # would land in one variable: refused, in one line.
    with pytest.raises(CheckpointMismatchError) as error:
        model_weights.check_model(path, tied)
    message = str(error.value)
    assert "\n" not in message
    assert ("encoder/embedding/_embeddings and decoder/embedding/_embeddings are one "
            "variable in this model (tied), two in the checkpoint") in message
    # A tied checkpoint reads back into a tied model, every weight included.
    other = TranslationModel(_config(seed=7))
    saved = tf.train.Checkpoint(model=other).write(str(tmp_path / "tied"))
    model_weights.read_model(saved, tied)
    for mine, theirs in zip(tied.weights, other.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def _tied_run_and_export(context):
    """The background job of ``tied``: a joint-vocabulary search30 run with tied
    embeddings (6 updates, a checkpoint every 3, the average of the last 2), then its
    export with --onnx --shortlist 5,2 --int8, whose own checks (SavedModel, ONNX and
    forced-decoding parity, the int8 BLEU drop) must pass."""
    out = context.tmp_path_factory.mktemp("tied")
    run, export = out / "run", out / "export"

    def work(launch):
        train = [sys.executable, ROOT / "train.py", "--variant", "search30", "--data",
                 context.corpus, "--quiet", "--out", run, "--max-steps", 6,
                 "--tokenizer", "sentencepiece", "--joint-vocabulary",
                 *tiny_args(src_vocab_size=PIECES, tgt_vocab_size=PIECES, tie_embeddings=True,
                            checkpoint_every=3, average_checkpoints=2)]
        code, output = run_logged(train, run.with_suffix(".log"), context.env, launch)
        assert code == 0, output[-3000:]
        command = [sys.executable, "-m", "keras_nmt.cli", "export", run, "--beam", SELECTING_BEAM,
                   "--onnx", "--shortlist", ",".join(map(str, SHORTLIST)), "--int8",
                   "--int8-max-drop", 5, "--out", export]
        code, output = run_logged(command, export.with_suffix(".log"), context.env, launch)
        assert code == 0, output[-3000:]
        return run, export

    return work


BACKGROUND_JOBS = {"tied": _tied_run_and_export}


@pytest.fixture(scope="session")
def tied(_background):
    """(run directory, export directory) of :func:`_tied_run_and_export`."""
    return _background.result("tied")


@pytest.fixture(scope="module")
def sentences(tiny_corpus):
    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if len(line.split()) <= 12][:32]


def test_a_tied_run_keeps_one_matrix_in_every_checkpoint(tied):
    run, _ = tied
    config = RunDir(run).load_config()
    assert config.tie_embeddings and config.src_vocab_size == config.tgt_vocab_size
    assert json.loads((run / "data.json").read_text(encoding="utf-8"))["joint_vocabulary"]
    # Training's checkpoints save the weights under the optimizer's path, beside its
    # slots: the one matrix has as many values of its shape as the output bias has of its
    # own (untied: twice as many).
    for directory in ("checkpoints", "averaged"):
        shapes = [tuple(shape) for _, shape in tf.train.list_variables(str(run / directory))]
        matrices = shapes.count((config.src_vocab_size, config.embedding))
        assert matrices == shapes.count((config.tgt_vocab_size,)), (directory, shapes)
        assert matrices == (1 if directory == "averaged" else 3), directory
    assert json.loads((run / "summary.json").read_text())["report_weights"] == "averaged"


def test_a_tied_run_resumes(tied, tmp_path, cli_runner):
    run, _ = tied
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    result = cli_runner("train", "--resume", "--out", copy, "--max-steps", 9,
                        "--no-lexicon", prog="train.py")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed at step 6" in result.stderr
    assert json.loads((copy / "summary.json").read_text())["updates"] == 9


def test_a_tied_run_translates_and_evaluates(tied, tiny_corpus, sentences, cli_runner, tmp_path):
    run, _ = tied
    expected = Translator.from_run_dir(run).translate(sentences[:4], beam_size=2)
    result = cli_runner("translate", run, "--beam", "2", "--quiet",
                        stdin="".join(line + "\n" for line in sentences[:4]))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [t.text for t in expected]
    assert "▁" not in result.stdout
    src, ref = tmp_path / "some.en", tmp_path / "some.fr"
    src.write_text("".join(line + "\n" for line in sentences), encoding="utf-8")
    french = (tiny_corpus / "valid.fr").read_text(encoding="utf-8").splitlines()
    english = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()
    ref.write_text("".join(french[english.index(line)] + "\n" for line in sentences),
                   encoding="utf-8")
    result = cli_runner("evaluate", run, "--src", src, "--ref", ref, "--beam", "2", "--json",
                        "--quiet")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["sentences"] == len(sentences) and 0 <= report["runs"][0]["bleu"] <= 100


def test_a_tied_run_s_export_decodes_as_keras_does(tied, sentences):
    """The SavedModel (both loaders) and ONNX with the export's shortlist give the Keras
    search's translations; the int8 model translates from the command line; ``serve``
    answers TF Serving's predict with the ONNX search's translations."""
    run, export = tied
    meta = json.loads((onnx_files(export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    assert meta["shortlist"] == list(SHORTLIST) and meta["int8"]["model"] == "nmt.int8.onnx"
    # The ONNX graph holds the one matrix once, in whichever of its graphs.
    import onnx

    from keras_nmt.export.onnx_rewrites import subgraphs

    shapes = []

    def visit(graph):
        shapes.extend(tuple(init.dims) for init in graph.initializer)
        shapes.extend(tuple(attribute.t.dims) for node in graph.node if node.op_type == "Constant"
                      for attribute in node.attribute if attribute.name == "value")
        for subgraph in subgraphs(graph):
            visit(subgraph)

    visit(onnx.load(str(onnx_files(export) / "nmt.onnx")).graph)
    config = RunDir(run).load_config()
    assert shapes.count((config.src_vocab_size, config.embedding)) == 1, shapes
    selected = Translator.from_run_dir(run).translate(sentences, beam_size=SELECTING_BEAM,
                                                      shortlist=SHORTLIST)
    check_selecting_export(export, sentences, selected, SELECTING_BEAM)
    expected = OnnxTranslator.from_export_dir(export).translate(sentences[:4], beam_size=2,
                                                                alpha=1.0)
    with ServerThread(Registry.from_export_dir(export)) as server:
        status, answer = server.call("/v1/models/nmt:predict", {
            "signature_name": "translate",
            "inputs": {"sentences": sentences[:4], "beam_size": 2, "alpha": 1.0}})
    assert status == 200 and answer["outputs"]["translations"] == [t.text for t in expected]
