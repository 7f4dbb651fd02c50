"""Every load of model weights checks that the checkpoint fits the model: a checkpoint of
another size or with a renamed variable is a one-line error, never random weights."""

import io
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from keras_nmt.runner import experiment
from keras_nmt.rundir import model_weights
from keras_nmt.cli import average as average_cli
from keras_nmt.cli import translate as translate_cli
from keras_nmt.core.config import variant_config
from keras_nmt.core.errors import CheckpointMismatchError, RunDirError
from keras_nmt.models.rnnsearch import TranslationModel, sentence_nll
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.runner.train_options import TrainOptions
from keras_nmt.decoding.keras_translator import Translator

from support import ROOT, TINY_SETTINGS


def _copy(tiny_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    return run_dir


def _rename(prefix: str, old: str, new: str) -> None:
    """Rewrite the checkpoint at ``prefix`` with the object ``old`` called ``new``, as a
    checkpoint written before (or after) a layer attribute was renamed would be."""
    reader = tf.train.load_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    for node in graph.nodes:
        for child in node.children:
            if child.local_name == old:
                child.local_name = new
        for attribute in node.attributes:
            attribute.checkpoint_key = attribute.checkpoint_key.replace(f"/{old}/", f"/{new}/")
    dtypes = reader.get_variable_to_dtype_map()
    del dtypes["_CHECKPOINTABLE_OBJECT_GRAPH"]
    # RestoreV2 also reads the input pipeline's state, which the reader cannot.
    tensors = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=list(dtypes),
                                   shape_and_slices=[""] * len(dtypes),
                                   dtypes=list(dtypes.values()))
    names = [name.replace(f"/{old}/", f"/{new}/") for name in dtypes]
    names.append("_CHECKPOINTABLE_OBJECT_GRAPH")
    tensors.append(tf.constant(graph.SerializeToString()))
    for stale in tf.io.gfile.glob(prefix + ".*"):
        tf.io.gfile.remove(stale)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)


def _overwrite_with_other_size(prefix: str, run_dir) -> None:
    """Replace the checkpoint at ``prefix`` by the weights of a model with hidden 24, not 16."""
    config = RunDir(run_dir).load_config()
    assert config.hidden == 16
    other = TranslationModel(config.replace(hidden=24))
    for stale in tf.io.gfile.glob(prefix + ".*"):
        tf.io.gfile.remove(stale)
    tf.train.Checkpoint(model=other).write(prefix)


def test_the_weights_of_another_size_are_a_one_line_error_in_translate(tiny_run, tmp_path):
    run_dir = _copy(tiny_run, tmp_path)
    best = tf.train.latest_checkpoint(str(run_dir / "best"))
    _overwrite_with_other_size(best, run_dir)
    stderr = io.StringIO()
    status = translate_cli.main([str(run_dir), "--quiet"], stdin=io.BytesIO(b"the queen .\n"),
                                stdout=io.StringIO(), stderr=stderr)
    assert status == 2
    [line] = stderr.getvalue().strip().splitlines()
    assert line == (
        f"keras-nmt translate: error: checkpoint {best} does not match this model: 16 of 23 "
        f"variables of another shape, first: encoder/forward_rnn/cell/kernel [16, 72] in the "
        f"checkpoint, [16, 48] in this model; was it written by another configuration?"
    )


def test_a_renamed_variable_is_named(tiny_run, tmp_path):
    run_dir = _copy(tiny_run, tmp_path)
    best = tf.train.latest_checkpoint(str(run_dir / "best"))
    _rename(best, "energy_kernel", "score_kernel")
    # A partial read alone takes it without a word, leaving that variable random.
    tf.train.Checkpoint(model=TranslationModel(RunDir(run_dir).load_config())) \
        .read(best).expect_partial()
    with pytest.raises(CheckpointMismatchError) as raised:
        Translator.from_run_dir(run_dir)
    assert str(raised.value) == (
        f"checkpoint {best} does not match this model: 1 of 23 variables missing, first: "
        f"decoder/attention/energy_kernel; was it written by another configuration?"
    )
    assert isinstance(raised.value, RunDirError)  # a user error of every command


def test_average_and_resume_check_the_checkpoints_too(tiny_run, tiny_corpus, tmp_path):
    run_dir = _copy(tiny_run, tmp_path)
    state = tf.train.get_checkpoint_state(str(run_dir / "checkpoints"))
    _, newest = state.all_model_checkpoint_paths  # step 0, never averaged, and step 10
    _rename(newest, "embedding_kernel", "word_kernel")
    stderr = io.StringIO()
    assert average_cli.main([str(run_dir), "--last", "1"], stdout=io.StringIO(),
                            stderr=stderr) == 2
    *progress, line = stderr.getvalue().strip().splitlines()
    assert progress == [f"reading {newest}"]
    assert line.startswith(f"keras-nmt average: error: checkpoint {newest} does not match")
    assert "1 of 23 variables missing, first: decoder/readout/embedding_kernel;" in line
    assert not (run_dir / "averaged").exists()

    _overwrite_with_other_size(newest, run_dir)
    with pytest.raises(CheckpointMismatchError,
                       match=f"checkpoint {newest} does not match this model: 16 of 23"):
        experiment.train(TrainOptions(
            variant="search30", data=str(tiny_corpus), out=str(run_dir), max_steps=12,
            overrides=dict(TINY_SETTINGS), quiet=True, resume=True, lexicon=False,
        ))


def test_a_checkpoint_without_the_model_names_what_is_missing(tmp_path):
    model = TranslationModel(variant_config("search30", {**TINY_SETTINGS, "src_vocab_size": 20,
                                                         "tgt_vocab_size": 20}))
    prefix = tf.train.Checkpoint(step=tf.Variable(3, dtype=tf.int64)).write(str(tmp_path / "c"))
    with pytest.raises(CheckpointMismatchError,
                       match="23 of 23 variables missing, first: encoder/embedding/_embeddings, "):
        model_weights.read_model(prefix, model)
    # Extra objects are fine: a training checkpoint holds more than the model.
    prefix = tf.train.Checkpoint(model=model, step=tf.Variable(3, dtype=tf.int64)).write(
        str(tmp_path / "d"))
    again = TranslationModel(model.config)
    model_weights.read_model(prefix, again)
    for saved, read in zip(model.weights, again.weights):
        np.testing.assert_array_equal(saved.numpy(), read.numpy())


def test_a_run_of_version_0_1_0_scores_as_it_did():
    """The weights of tests/fixtures/run-0.1.0 through teacher forcing (training's and
    force decoding's pass): the per-sentence NLL and an attention row recorded before the
    decoder's loop was rewritten to weigh C h_j and fuse the products of s_(i-1). The
    same weights translate as they did: test_rundir's test of the fixture."""
    model = RunDir(ROOT / "tests" / "fixtures" / "run-0.1.0").load_model()
    source = tf.constant([[6, 1, 9, 36, 5, 3] + [0] * 6,
                          [1, 1, 1, 4, 1, 11, 1, 13, 14, 1, 5, 3],
                          [4, 49, 1, 25, 4, 1, 5, 3] + [0] * 4])
    targets = [[29, 1, 10, 1, 4], [1, 1, 1, 8, 1, 5, 35, 16, 41, 1, 4], [9, 50, 1, 26, 9, 1, 4]]
    target_in = tf.constant([[2] + row + [0] * (11 - len(row)) for row in targets])
    target_out = tf.constant([row + [3] + [0] * (11 - len(row)) for row in targets])
    logits, weights = model.forced(source, target_in)
    np.testing.assert_allclose(sentence_nll(logits, target_out).numpy(),
                               [14.58279037475586, 30.530988693237305, 23.866846084594727],
                               rtol=1e-6)
    np.testing.assert_allclose(
        weights.numpy()[0, 1],
        [0.43881726, 0.19217406, 0.09641544, 0.15898018, 0.08711675, 0.02649626] + [0.0] * 6,
        atol=1e-6)
