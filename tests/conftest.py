"""Shared fixtures: a tiny generated corpus and a tiny trained run directory."""

import pytest
from hypothesis import settings as hypothesis_settings

from keras_nmt.corpus import builtin

# Property-based tests draw the same examples on every run (seeded from each test), so a
# red CI run is one anyone can repeat and nothing fails by chance; nothing is stored in
# .hypothesis/ either. `pytest --hypothesis-profile explore` draws new examples.
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile("repeatable")

_SESSION_ENVIRONMENT: dict[str, str] = {}

TINY_SETTINGS = {
    "embedding": 16, "hidden": 16, "attention": 16, "maxout": 8,
    "batch_size": 16, "beam_size": 2, "eval_every": 5,
}


def pytest_configure(config):
    # TensorFlow multiplies float32 matrices in TensorFloat-32 on GPUs that have it (Ampere
    # and later). The tests compare float32 results with numpy and across paths at float32
    # tolerances: on an H100, 10 of them failed with TF32 on, none with it off.
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)
    import os

    _SESSION_ENVIRONMENT.update(os.environ)  # TensorFlow's import sets a few


@pytest.fixture(autouse=True)
def _environment_restored():
    """After each test, os.environ is what it was when the session began. Commands and
    bench scripts run in process set TF_CPP_MIN_LOG_LEVEL for their own sake (some in
    session fixtures); left behind, every later child process would take it for the
    user's setting and show TensorFlow's start-up lines."""
    import os

    yield
    for name in set(os.environ) - set(_SESSION_ENVIRONMENT) - {"PYTEST_CURRENT_TEST"}:
        del os.environ[name]  # pytest's own variable it removes itself
    os.environ.update(_SESSION_ENVIRONMENT)


@pytest.fixture
def tiny_settings():
    """The tiny model's ``--set`` overrides (a fresh dict a test may change)."""
    return dict(TINY_SETTINGS)


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory):
    """A built-in corpus of 400 / 30 / 40 pairs with gold alignments (*.align)."""
    spec = builtin.BuiltinCorpusSpec(
        seed=7, train_size=400, valid_size=30, test_size=40, max_source_tokens=40
    )
    return builtin.write_corpus(tmp_path_factory.mktemp("corpus"), spec)


@pytest.fixture(scope="session")
def tiny_run(tiny_corpus, tmp_path_factory):
    """A search30 run directory trained for 10 steps on ``tiny_corpus`` (poor translations,
    real files: config, vocabularies, checkpoints, best weights, summary)."""
    from keras_nmt import experiment

    out = tmp_path_factory.mktemp("runs") / "search30"
    experiment.train(experiment.TrainOptions(
        variant="search30", data=str(tiny_corpus), out=str(out), max_steps=10,
        overrides=dict(TINY_SETTINGS), quiet=True,
    ))
    return out


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    """A copy of ``tiny_run`` (without its TensorBoard logs) that a test may change."""
    import shutil

    copy = tmp_path / "run-copy"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tensorboard"))
    return copy


def edit_json(path, **changes):
    """Rewrite the JSON object in ``path`` with ``changes``; a value None removes the key."""
    import json

    values = json.loads(path.read_text(encoding="utf-8"))
    values.update(changes)
    values = {key: value for key, value in values.items() if value is not None}
    path.write_text(json.dumps(values), encoding="utf-8")


@pytest.fixture
def encdec_labelled_run(run_copy):
    """``run_copy`` with a config.json that says RNNencdec (encdec30): its weights are
    still RNNsearch's, so it only serves checks that refuse before the weights load."""
    edit_json(run_copy / "config.json", architecture="encdec", variant="encdec30")
    return run_copy


@pytest.fixture(scope="session")
def tiny_export(tiny_run, tmp_path_factory):
    """``python -m export`` of ``tiny_run``, done once: EXPORT_DIR with nmt/1/ (beam 5,
    2-best lists, attention), models.config, SERVING.md and nmt/1/onnx/nmt.onnx (+
    .onnx.json and the vocabularies; :func:`onnx_files`)."""
    from keras_nmt.cli import export as cli

    out = tmp_path_factory.mktemp("export")
    argv = [str(tiny_run), "--out", str(out), "--beam", "5", "--nbest", "2", "--return-attention",
            "--onnx"]
    assert cli.main(argv) == 0
    return out


@pytest.fixture(scope="session")
def tiny_selecting_export(tiny_run, tmp_path_factory):
    """``keras-nmt export`` of ``tiny_run`` with vocabulary selection and int8, done once:
    beam 3, ``--onnx --shortlist 5,2 --int8`` (the int8 check allows a drop of 5 BLEU:
    the barely trained model scores about 0 anyway)."""
    from keras_nmt.cli import export as cli

    out = tmp_path_factory.mktemp("selecting-export")
    argv = [str(tiny_run), "--out", str(out), "--beam", "3", "--onnx", "--shortlist", "5,2",
            "--int8", "--int8-max-drop", "5"]
    assert cli.main(argv) == 0
    return out


@pytest.fixture(scope="session")
def tiny_spm_run(tiny_corpus, tmp_path_factory):
    """A search30 run with ``--tokenizer sentencepiece`` (120 / 150 pieces) trained for 3
    steps on ``tiny_corpus``, on token batches of <= 200 slots; its summary is
    summary.json."""
    from keras_nmt import experiment

    out = tmp_path_factory.mktemp("runs") / "spm"
    experiment.train(experiment.TrainOptions(
        variant="search30", data=str(tiny_corpus), out=str(out), max_steps=3, quiet=True,
        tokenizer="sentencepiece",
        overrides={**TINY_SETTINGS, "src_vocab_size": 120, "tgt_vocab_size": 150,
                   "batch_tokens": 200},
    ))
    return out


@pytest.fixture(scope="session")
def tiny_spm_export(tiny_spm_run, tmp_path_factory):
    """``python -m export`` of ``tiny_spm_run`` with --onnx, done once (beam 5, 2-best
    lists): EXPORT_DIR with nmt/1/ and in nmt/1/onnx/ nmt.onnx, nmt.onnx.json, the
    vocabularies and nmt.spm.en.model / nmt.spm.fr.model."""
    from keras_nmt.cli import export as cli

    out = tmp_path_factory.mktemp("spm-export")
    argv = [str(tiny_spm_run), "--out", str(out), "--beam", "5", "--nbest", "2", "--onnx"]
    assert cli.main(argv) == 0
    return out


def savedmodel_loaders(export_dir):
    """The export's SavedModel the two ways it gets loaded: TF2 and the TF1 session."""
    from keras_nmt.export.loaders import SessionModel, TF2Model

    path = export_dir / "nmt" / "1"
    return {"tf2": TF2Model(path), "tf1": SessionModel(path)}


def onnx_files(export_dir, version=1):
    """The directory of an export's ONNX files (nmt.onnx, nmt.onnx.json, ...)."""
    from keras_nmt.export import layout

    return layout.onnx_dir(export_dir, "nmt", version)


def run_translator(run_dir):
    from keras_nmt.translator import Translator

    return Translator.from_run_dir(run_dir)


def scored_pairs(corpus, count=9):
    """Pairs to force-decode: ``count`` test pairs, an empty target, an empty source, and
    a pair longer than translate's default maximum source length (translate would cut
    its source; scoring must not)."""
    sources = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    targets = (corpus / "test.fr").read_text(encoding="utf-8").splitlines()
    return (sources[:count] + [sources[count], "", " ".join(sources[:40])],
            targets[:count] + ["", targets[count], " ".join(targets[:12])])


def training_nll(run_dir, model, sources, targets, tmp_path, batch_size=5):
    """Per pair, the NLL as training's evaluation computes it: the run's graph encoders,
    tf.data batches (data.evaluation_batches) and models.sentence_nll."""
    import numpy as np

    from keras_nmt import data
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.models import sentence_nll
    from keras_nmt.rundir import RunDir

    files = ParallelFiles(tmp_path / "nll.src", tmp_path / "nll.tgt")
    for path, lines in ((files.source, sources), (files.target, targets)):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    batches = data.evaluation_batches(files, *RunDir(run_dir).graph_encoders(),
                                      batch_size=batch_size)
    out = []
    for (source, target_in), target_out in batches:
        out.extend(sentence_nll(model((source, target_in), training=False), target_out).numpy())
    return np.array(out)


def peaked_weights_run(source, target, unk_bias=0.0):
    """A copy of run ``source`` at ``target`` whose best weights are peaked random ones (a
    barely trained model only repeats a word or two), with ``unk_bias`` added to the
    <unk> output bias (a large one: a model that generates <unk> most of the time)."""
    import shutil

    import numpy as np
    import tensorflow as tf

    from keras_nmt.constants import UNK_ID
    from keras_nmt.models import TranslationModel
    from keras_nmt.rundir import RunDir

    shutil.copytree(source, target,
                    ignore=shutil.ignore_patterns("tensorboard", "checkpoints", "best"))
    model = TranslationModel(RunDir(target).load_config())
    rng = np.random.default_rng(3)
    for weight in model.weights:
        shape = tuple(weight.shape)
        values = rng.normal(0.0, 2.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.5, shape)
        if weight.path.endswith("readout/output_bias"):
            values[UNK_ID] += unk_bias
        weight.assign(values.astype("float32"))
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(target / "best"), 1).save()
    return target
