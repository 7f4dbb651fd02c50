"""RunDir, the one reader of a run directory: inspection without TensorFlow, codecs, graph
encoders, and a run directory written by keras-nmt 0.1.0 (before the package was laid
out by concept) loading and translating as it did then."""

import json
import pathlib
import subprocess
import sys

import pytest

from keras_nmt.core.errors import RunDirError
from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.text import word
from support import ROOT

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
OLD_RUN = FIXTURES / "run-0.1.0"


def test_inspect_reads_small_files_without_tensorflow():
    code = (
        "import sys\n"
        "from keras_nmt.rundir.run_directory import RunDir\n"
        f"files = RunDir({str(OLD_RUN)!r}).inspect()\n"
        "assert files.src == 'en' and files.tgt == 'fr', files\n"
        "assert files.source_codec.kind == 'word'\n"
        "assert 'tensorflow' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.strip() == "ok", result.stderr


def test_codecs_are_read_once_and_match_the_vocabulary_files():
    run = RunDir(OLD_RUN)
    source, target = run.codecs()
    assert run.codecs()[0] is source  # one read per RunDir
    assert isinstance(source, word.WordCodec) and (source.lang, target.lang) == ("en", "fr")
    lines = (OLD_RUN / "vocab.fr.txt").read_text(encoding="utf-8").splitlines()
    assert list(target.vocabulary.tokens) == lines
    assert run.load_vocabularies() == (source.vocabulary, target.vocabulary)


def test_graph_encoders_agree_with_the_python_codecs():
    import tensorflow as tf

    run = RunDir(OLD_RUN)
    (source, target), (graph_source, graph_target) = run.codecs(), run.graph_encoders()
    lines = ["The queen is strange.", "", "an uncle draws the cars ."]
    ids = graph_source(tf.constant(lines)).to_list()
    assert [row[:-1] for row in ids] == [source.encode(line) for line in lines]
    rows = [target.encode("le chat dort .") + [3, 5, 6], [2, 0, 3]]
    decoded = graph_target.decode(tf.ragged.constant(rows)).numpy()
    assert [t.decode("utf-8") for t in decoded] == [target.decode(r) for r in rows]


def test_a_run_directory_of_version_0_1_0_translates_as_it_did():
    from keras_nmt.decoding.keras_translator import Translator

    expected = json.loads((FIXTURES / "run-0.1.0-translations.json").read_text(encoding="utf-8"))
    translator = Translator.from_run_dir(OLD_RUN)
    results = translator.translate([e["line"] for e in expected], beam_size=2, nbest=2,
                                   forbid_unk=True)
    for want, got in zip(expected, results):
        assert got.text == want["text"]
        assert got.score == pytest.approx(want["score"], abs=1e-5)
        assert [h.text for h in got.hypotheses] == [text for text, _ in want["nbest"]]


def test_load_model_and_its_errors(tmp_path):
    model = RunDir(OLD_RUN).load_model()
    assert model.config.variant == "search30"
    with pytest.raises(RunDirError, match="not found"):
        RunDir(tmp_path / "missing").inspect()
    with pytest.raises(RunDirError, match="no config.json"):
        RunDir(tmp_path).inspect()
    with pytest.raises(RunDirError, match="no trained weights"):
        RunDir(OLD_RUN).inspect(weights="last")  # the fixture keeps best/ only
