"""The force-decoding ONNX model (NAME.forced.onnx) and the onnxruntime path that runs it
(OnnxTranslator.align, translate(..., align=True)) against the TensorFlow force decoding."""

import json
import subprocess
import sys

import numpy as np
import pytest

from support import ROOT, child_env, onnx_files, run_translator, scored_pairs
from keras_nmt.evaluation.forced import ForcedPair, force_decode
from keras_nmt.core.errors import ExportError
from keras_nmt.export import parity
from keras_nmt.decoding.onnx_translator import OnnxTranslator


class TokensCodec:
    """A target codec that reads a line as its space-separated tokens, unchanged."""

    kind = "tokens"

    def __init__(self, vocabulary):
        self.vocabulary = vocabulary

    def tokenize(self, line):
        return line.split(" ") if line else []

    def encode(self, line):
        return self.vocabulary.encode(self.tokenize(line))


@pytest.fixture(scope="module")
def translator(tiny_run):
    return run_translator(tiny_run)


@pytest.fixture(scope="module")
def served(tiny_export):
    return OnnxTranslator.from_export_dir(tiny_export)


@pytest.fixture(scope="module")
def pairs(tiny_corpus):
    sources, targets = scored_pairs(tiny_corpus)
    # An empty target (EOS alone), an empty source, and "<unk>" written in a target.
    return sources + [sources[0], "", sources[1]], targets + ["", "", "<unk> " + targets[1]]


def test_export_writes_the_forced_model_beside_the_search(tiny_export):
    meta = json.loads((onnx_files(tiny_export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    assert meta["forced"] == {"model": "nmt.forced.onnx", "inputs": ["source_ids", "target_ids"],
                              "outputs": ["attention", "token_logprobs"]}
    assert (onnx_files(tiny_export) / "nmt.forced.onnx").is_file()


def test_align_matches_tensorflow_force_decoding(served, translator, pairs):
    sources, targets = pairs
    reference = force_decode(translator, sources, targets, attention=True)
    aligned = served.align(sources, targets, batch_size=4)
    result = parity.compare_forced(reference, aligned)
    assert result["same_tokens"] and result["attention"]
    assert result["max_logprob_diff"] < 1e-4 and result["max_attention_diff"] < 1e-5
    assert parity.agrees_forced(result)
    for pair in aligned:
        assert pair.attention.shape == (len(pair.target_tokens) + 1, len(pair.source_tokens) + 1)
        np.testing.assert_allclose(pair.attention.sum(axis=1), 1.0, atol=1e-5)
    assert aligned[-3].target_tokens == () and aligned[-3].tokens == 1
    assert aligned[-2].source_tokens == () and aligned[-2].attention.shape == (1, 1)
    assert aligned[-1].target_tokens[0] == "<unk>" and aligned[-1].unknown >= 1


def test_compare_forced_sees_a_wrong_model(translator, pairs):
    sources, targets = pairs
    reference = force_decode(translator, sources[:3], targets[:3], attention=True)
    assert parity.agrees_forced(parity.compare_forced(reference, reference))
    shifted = [ForcedPair(p.source_tokens, p.target_tokens, p.token_logprobs + 2e-4, p.attention,
                          p.unknown) for p in reference]
    assert not parity.agrees_forced(parity.compare_forced(reference, shifted))
    renamed = [ForcedPair(p.source_tokens, ("x",) + p.target_tokens[1:], p.token_logprobs,
                          p.attention, p.unknown) for p in reference]
    assert not parity.compare_forced(reference, renamed)["same_tokens"]


def test_translations_come_with_their_alignment(served, translator, tiny_corpus):
    lines = (tiny_corpus / "valid.en").read_text(encoding="utf-8").splitlines()[:6] + ["", " "]
    results = served.translate(lines, beam_size=3, align=True, batch_size=4)
    assert results[-1].alignment is None and results[-2].alignment is None
    # The hypotheses' own tokens: a barely trained model's output ("." x 36) does not
    # survive detokenizing and tokenizing again.
    given = type("Given", (), {"model": translator.model, "source_codec": translator.source_codec,
                               "target_codec": TokensCodec(translator.target_vocab)})()
    reference = force_decode(given, lines[:-2], [" ".join(r.tokens) for r in results[:-2]],
                             attention=True)
    for line, result, ref in zip(lines, results, reference):
        pair = result.alignment
        assert pair.target_tokens == result.tokens == ref.target_tokens
        assert pair.source_tokens == ref.source_tokens
        np.testing.assert_allclose(pair.token_logprobs, ref.token_logprobs, atol=1e-4)
        np.testing.assert_allclose(pair.attention, ref.attention, atol=1e-5)
        # The search ranks by log-probability / length ** alpha over the whole vocabulary
        # (the tiny export selects none): the forced pass gives the same score back.
        assert pair.score(served.alpha) == pytest.approx(result.score, abs=1e-4)


def test_an_export_without_the_forced_model_says_to_export_again(tiny_export, tmp_path):
    import shutil

    copy = tmp_path / "onnx"
    shutil.copytree(onnx_files(tiny_export), copy)
    meta = json.loads((copy / "nmt.onnx.json").read_text(encoding="utf-8"))
    del meta["forced"]
    (copy / "nmt.onnx.json").write_text(json.dumps(meta), encoding="utf-8")
    old = OnnxTranslator.from_export_dir(copy)
    assert old.translate(["a"])[0].alignment is None  # translation alone still works
    with pytest.raises(ExportError, match="no force-decoding model .* export the run again"):
        old.align(["a"], ["b"])


def test_encdec_forced_model_gives_log_probabilities_only(tmp_path, translator):
    """RNNencdec has no attention: its forced model has no attention output, and its
    log-probabilities are the TensorFlow ones."""
    from keras_nmt.core.config import Config
    from keras_nmt.export.onnx_conversion import OnnxModel, convert_forced
    from keras_nmt.models.rnnsearch import TranslationModel

    config = Config.from_dict({**translator.model.config.to_dict(), "architecture": "encdec",
                               "variant": "encdec30"})
    model = TranslationModel(config, precision="float32")
    convert_forced(model, tmp_path / "encdec.forced.onnx")
    onnx_model = OnnxModel(tmp_path / "encdec.forced.onnx")
    assert onnx_model.outputs == ["token_logprobs"]
    encdec = type("Run", (), {"model": model, "source_codec": translator.source_codec,
                              "target_codec": translator.target_codec})()
    sources, targets = ["a b c", "d"], ["e f", ""]
    reference = force_decode(encdec, sources, targets)
    source = parity.pad_batch([translator.source_codec.encode(s) + [3] for s in sources])
    target = parity.pad_batch([translator.target_codec.encode(t) + [3] for t in targets])
    logprobs = onnx_model.run({"source_ids": source, "target_ids": target})["token_logprobs"]
    for row, pair in enumerate(reference):
        np.testing.assert_allclose(logprobs[row, : pair.tokens], pair.token_logprobs, atol=1e-5)
        assert np.all(logprobs[row, pair.tokens:] == 0.0)


def test_alignment_path_imports_no_tensorflow(tiny_export, translator, pairs):
    """In an interpreter where every package of the training install fails to import (as
    on the plain install), the onnxruntime path aligns, and gives the TensorFlow numbers."""
    sources, targets = pairs
    probe = (
        "import json, sys\n"
        "from keras_nmt.cli import TRAINING_PACKAGES\n"
        "for name in TRAINING_PACKAGES: sys.modules[name] = None\n"
        "from keras_nmt.decoding.onnx_translator import OnnxTranslator\n"
        f"served = OnnxTranslator.from_export_dir({str(tiny_export)!r})\n"
        f"pairs = served.align({sources!r}, {targets!r})\n"
        "best = served.translate(['a b c'], align=True)[0].alignment\n"
        "heavy = sorted(m for m, module in sys.modules.items()\n"
        "               if module is not None and m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "print(json.dumps({'heavy': heavy, 'best': best.attention.shape,\n"
        "                  'logprobs': [p.token_logprobs.tolist() for p in pairs],\n"
        "                  'attention': [p.attention.tolist() for p in pairs]}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=child_env(), cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["heavy"] == []
    assert out["best"][1] == 4  # "a b c" and EOS
    reference = force_decode(translator, sources, targets, attention=True)
    for ref, logprobs, attention in zip(reference, out["logprobs"], out["attention"]):
        np.testing.assert_allclose(logprobs, ref.token_logprobs, atol=1e-4)
        np.testing.assert_allclose(attention, ref.attention, atol=1e-5)
