"""A SentencePiece run end to end: ``python -m export`` (SavedModel with tensorflow_text's
SentencePiece ops in the graph, ONNX with the models beside it), parity of the Keras
beam search, both SavedModel loaders and onnx_translate, bad input, the TF Serving
stand-in, and the evaluation on the run's pieces."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from keras_nmt.export import parity
from keras_nmt.cli import evaluate as evaluate_cli
from keras_nmt.evaluation import alignment, scoring
from keras_nmt.text import codecs
from keras_nmt.core.constants import EOS_ID, UNK_ID
from keras_nmt.text.word import tokenize
from support import (
    BAD_INPUTS, ROOT, check_selecting_export, child_env, onnx_files, run_translator,
    savedmodel_loaders, shortlist_candidates,
)

EXPORT_BEAM = 5


@pytest.fixture(scope="module")
def translator(tiny_spm_run):
    return run_translator(tiny_spm_run)


@pytest.fixture(scope="module")
def loaded(tiny_spm_export):
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    return {**savedmodel_loaders(tiny_spm_export),
            "onnx": OnnxTranslator.from_export_dir(tiny_spm_export)}


@pytest.fixture(scope="module")
def sentences(tiny_corpus):
    """100 sentences of at most 12 words: the barely trained model decodes every one to
    the length limit (twice the source), so short ones keep the test fast."""
    lines = (tiny_corpus / "train.en").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if len(line.split()) <= 12][:100]


def test_export_files(tiny_spm_export, tiny_spm_run):
    meta = json.loads((onnx_files(tiny_spm_export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    assert meta["tokenizer"] == "sentencepiece"
    assert (meta["source_spm"], meta["target_spm"]) == ("nmt.spm.en.model", "nmt.spm.fr.model")
    saved_model = (tiny_spm_export / "nmt" / "1" / "saved_model.pb").read_bytes()
    for lang in ("en", "fr"):
        model = (tiny_spm_run / f"spm.{lang}.model").read_bytes()
        assert (onnx_files(tiny_spm_export) / f"nmt.spm.{lang}.model").read_bytes() == model
        # The SavedModel carries the model itself, not a path into the run directory.
        assert model in saved_model
    assert str(tiny_spm_run).encode() not in saved_model
    assert not [p for p in tiny_spm_export.iterdir() if p.name.startswith(".")]
    serving = (tiny_spm_export / "SERVING.md").read_text(encoding="utf-8")
    assert "SentencepieceOp" in serving and "tensorflow_text:ops_lib" in serving
    assert "nmt.spm.*.model" in serving


def test_word_serving_md_has_no_tf_text_note():
    from keras_nmt.export.serving_files import serving_md

    assert "SentencepieceOp" not in serving_md("nmt", 1, {}, onnx=True)


@pytest.mark.parametrize("beam", [1, 5])
def test_savedmodel_and_onnx_match_keras_beam_search(loaded, translator, sentences, beam):
    reference = translator.translate(sentences, beam_size=beam, alpha=1.0)
    expected = parity.from_translations(reference)
    assert any(len(t.source_tokens) > len(tokenize(s, "en")) for s, t in zip(sentences, reference))
    for name in ("tf2", "tf1"):
        model = loaded[name]
        strings = model.run("translate", sentences=sentences, beam_size=beam, alpha=1.0)
        result = parity.compare(expected, parity.from_string_outputs(strings))
        assert parity.agrees(result), (name, "translate", result)
        assert list(strings["truncated"]) == [t.truncated for t in reference]
        if name == "tf2":
            continue  # the ids signature does not depend on the codec: TF1 (TF Serving's) suffices
        decoded = parity.run_ids(lambda feeds: model.run("translate_ids", **feeds),
                                 translator.encode(sentences), translator.target_vocab, beam, 1.0)
        result = parity.compare(expected, decoded)
        assert parity.agrees(result), (name, "translate_ids", result)
    onnx = loaded["onnx"].translate(sentences, beam_size=beam, alpha=1.0)
    result = parity.compare(expected, [parity.Decoded(t.text, t.tokens, t.score) for t in onnx])
    # onnxruntime rounds some scores differently: equally scored hypotheses of the barely
    # trained model may swap (see test_export); nothing else is allowed.
    assert parity.agrees(result, allow_ties=True), ("onnx", result)
    assert result["identical"] >= 0.9, ("onnx", result)
    same = [o.text == t.text for o, t in zip(onnx, reference)]
    assert all(o.text == loaded["onnx"].target_codec.decode(
        translator.target_vocab.encode(o.tokens)) for o in onnx)
    assert sum(same) >= 0.9 * len(sentences)


def test_the_savedmodel_onnx_and_keras_give_the_same_word_confidences(loaded, translator,
                                                                       sentences):
    """A SentencePiece target's words are made of pieces: the SavedModel's ``words`` and
    ``word_confidence`` (TF Serving's session loader), onnx-translate's and the Keras
    API's are the same words with the same figures."""
    lines = sentences[:40] + ["", "The man is here. The woman is there."]
    keras_side = translator.translate(lines, beam_size=EXPORT_BEAM, alpha=1.0, confidence=True)
    onnx_side = loaded["onnx"].translate(lines, beam_size=EXPORT_BEAM, alpha=1.0,
                                         confidence=True)
    out = loaded["tf1"].run("translate", sentences=lines, beam_size=EXPORT_BEAM, alpha=1.0)
    words = [[word.decode("utf-8") for word in row] for row in out["words"]]
    pieces_in_words = 0
    for row, figures, ours, theirs in zip(words, out["word_confidence"], keras_side, onnx_side):
        if ours.confidence is None:  # the empty line
            assert not any(row) and not figures.any()
            continue
        count = len(ours.confidence.words)
        assert tuple(row[:count]) == ours.confidence.words == tuple(ours.text.split())
        assert not any(row[count:])
        np.testing.assert_allclose(figures[:count], ours.confidence.word_confidences, rtol=1e-4)
        pieces_in_words += len(ours.tokens) - count
        if theirs.text == ours.text:  # onnxruntime may pick another of two tied hypotheses
            assert theirs.confidence.words == ours.confidence.words
            np.testing.assert_allclose(theirs.confidence.word_confidences,
                                       ours.confidence.word_confidences, rtol=1e-4)
    assert pieces_in_words > 0


def test_bad_input_through_savedmodel_and_onnx_translate(loaded, translator):
    reference = translator.translate(BAD_INPUTS, beam_size=EXPORT_BEAM)
    truncated = [t.truncated for t in reference]
    assert truncated[:6] == [0] * 6 and truncated[6] > 0 and truncated[7] > 0
    assert [t.text for t in reference[:3]] == ["", "", ""]
    for name in ("tf2", "tf1"):
        model = loaded[name]
        out = model.run("serving_default", sentences=BAD_INPUTS)
        assert [x.decode("utf-8") for x in out["translations"]] == [t.text for t in reference], name
        np.testing.assert_allclose(out["scores"], [t.score for t in reference], atol=1e-4)
        assert list(out["truncated"]) == truncated, name
        assert out["nbest_scores"][:3].tolist() == [[0.0, -np.inf]] * 3
        empty = model.run("serving_default", sentences=np.array([], dtype=object))
        assert empty["translations"].shape == (0,) and empty["nbest_scores"].shape == (0, 2)
    onnx = loaded["onnx"].translate(BAD_INPUTS)
    assert [t.text for t in onnx] == [t.text for t in reference]
    assert [t.truncated for t in onnx] == truncated
    np.testing.assert_allclose([t.score for t in onnx], [t.score for t in reference], atol=1e-4)
    assert loaded["onnx"].translate([]) == []


def test_onnx_translate_without_tensorflow(tiny_spm_export, translator):
    from support import HARD_LINES, onnx_translate_probe

    lines = ["The man is here.", "A dog 😀 runs."] + HARD_LINES
    expected = translator.translate(lines, beam_size=EXPORT_BEAM)
    out, stderr, heavy = onnx_translate_probe([str(tiny_spm_export), "--quiet"], lines)
    assert heavy == []
    assert out == [t.text for t in expected]
    assert "▁" not in "".join(out)
    assert stderr[0].startswith("onnx_translate: warning: 1 sentence(s) longer than 100 tokens")


def test_standin_loads_tf_text_ops_like_tf_serving(tiny_spm_export, translator):
    """In a fresh interpreter (no tensorflow_text yet), the stand-in finds the
    SentencePiece ops missing, registers TF Text's ops as TF Serving links them, and
    serves the export."""
    lines = ["The man is here.", ""]
    probe = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import fake_model_server as s\n"
        f"path = {str(tiny_spm_export / 'nmt' / '1')!r}\n"
        "missing = s.missing_ops(path)\n"
        "before = 'tensorflow_text' in sys.modules\n"
        "servable = s.Servable('nmt', 1, path)\n"
        f"out = servable.run('serving_default', {{'sentences': {lines!r}}})\n"
        "print(json.dumps([missing, before, servable.needed_op_libraries,\n"
        "                  [t.decode('utf-8') for t in out['translations']]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=ROOT, timeout=180,
                            env=child_env(TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr
    missing, before, needed, texts = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"} <= set(missing)
    assert not before and needed
    assert texts == [t.text for t in translator.translate(lines, beam_size=EXPORT_BEAM)]


def test_the_loaders_load_an_export_in_a_fresh_process(tiny_spm_export, translator):
    """Nothing but the project's loaders imported: they register TF Text's ops themselves."""
    probe = (
        "import json\n"
        "from keras_nmt.export.loaders import SessionModel, TF2Model\n"
        f"path = {str(tiny_spm_export / 'nmt' / '1')!r}\n"
        "out = [[t.decode('utf-8') for t in kind(path).run('serving_default', "
        "sentences=['The man is here.'])['translations']] for kind in (TF2Model, SessionModel)]\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=ROOT, timeout=180, env=child_env(TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr
    [expected] = [t.text for t in translator.translate(["The man is here."], beam_size=EXPORT_BEAM)]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [[expected], [expected]]


def test_gold_words_of_tokens_maps_pieces_to_gold_words():
    assert alignment.gold_words_of_tokens(["▁The", "▁ma", "n", "▁is", "."], ["The", "man", "is", "."]) == [0, 1, 1, 2, 3]
    assert alignment.gold_words_of_tokens(["▁l", "'", "homme"], ["l'", "homme"]) == [0, 0, 1]
    # SentencePiece's NFKC made "…" three characters.
    assert alignment.gold_words_of_tokens(["▁ah", "...", "▁oui"], ["ah", "…", "oui"]) == [0, 1, 2]
    # Texts of different lengths: positions scaled (4 piece characters on 2 words of 1).
    assert alignment.gold_words_of_tokens(["▁ab", "cd"], ["x", "y"]) == [0, 1]
    assert alignment.gold_words_of_tokens(["▁", "x"], ["x"]) == [0, 0]
    assert alignment.word_links({(0, 1), (1, 1), (2, 0)}, [0, 0, 1], [0, 1]) == {(0, 1), (1, 0)}


def test_evaluate_scores_a_sentencepiece_run_on_its_pieces(translator, tiny_corpus, tmp_path):
    count = 12
    sources = (tiny_corpus / "test.en").read_text(encoding="utf-8").splitlines()[:count]
    references = (tiny_corpus / "test.fr").read_text(encoding="utf-8").splitlines()[:count]
    sources[1] = "ʬ " + sources[1]  # a character the source model never saw: UNK
    gold = alignment.read_gold(tiny_corpus / "test.align", *(
        (tiny_corpus / f"test.{lang}").read_text(encoding="utf-8").splitlines()
        for lang in ("en", "fr")), "en", "fr", tiny_corpus / "test.en")[:count]
    source_codec, target_codec = translator.source_codec, translator.target_codec
    assert source_codec.kind == codecs.SENTENCEPIECE
    result = scoring.evaluate_run(translator, sources, references, beam_size=2, gold=gold)
    subset = result["details"]["no_unk_indices"]
    # Pieces, not words: the word tokenizer's tokens are mostly not pieces at all.
    assert subset == [i for i in range(count) if i != 1]
    assert UNK_ID in source_codec.encode(sources[1])
    assert result["no_unk"]["sentences"] == count - 1
    rows = result["bleu_by_length"]
    assert sum(row["sentences"] for row in rows) == count
    # AER: piece links become links between gold words, inside the sentences' words.
    aer = result["aer"]
    assert aer["sentences"] == count and 0.0 <= aer["aer"] <= 1.0
    assert "piece links mapped" in aer["method"]
    for links, source, reference in zip(result["details"]["predicted_alignments"], sources, references):
        words = len(tokenize(source, "en")), len(tokenize(reference, "fr"))
        assert links and all(i < words[0] and j < words[1] for i, j in links)
        assert {j for _, j in links} == set(range(words[1]))  # every reference word linked
    # Force-decoding runs on pieces: one attention row per reference piece (+ EOS).
    [weights] = alignment.forced_attention(translator, sources[:1], references[:1])
    assert weights.shape == (len(target_codec.encode(references[0])) + 1,
                             len(source_codec.encode(sources[0])) + 1)
    assert EOS_ID not in target_codec.encode(references[0])


def test_evaluate_cli_on_a_sentencepiece_run(tiny_spm_run, tiny_corpus, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("test.en", "test.fr", "test.align"):
        lines = (tiny_corpus / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (data / name).write_text("".join(lines[:6]), encoding="utf-8")
    argv = [str(tiny_spm_run), "--src", str(data / "test.en"), "--ref", str(data / "test.fr"),
            "--beam", "1", "--json", "--plots", str(tmp_path / "plots"), "--heatmaps", "1"]
    assert evaluate_cli.main(argv) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["no_unk"]["sentences"] == 6 and run["aer"]["sentences"] == 6
    assert len(list((tmp_path / "plots").glob("fig3_*.png"))) == 1


def test_onnx_translate_refuses_a_sentencepiece_export_without_its_models(tiny_spm_export, tmp_path):
    import io

    from keras_nmt.cli import onnx_translate

    exported = onnx_files(tiny_spm_export)
    meta = json.loads((exported / "nmt.onnx.json").read_text(encoding="utf-8"))
    for name in (meta["source_vocab"], meta["target_vocab"], meta["source_spm"]):
        (tmp_path / name).write_bytes((exported / name).read_bytes())
    (tmp_path / "nmt.spm.bad.model").write_bytes(b"not a model")
    cases = [
        ({k: v for k, v in meta.items() if k != "target_spm"}, "lacks target_spm (tokenizer sentencepiece)"),
        (meta, "SentencePiece model not found: "),  # named in the metadata, not copied
        ({**meta, "target_spm": meta["source_spm"]}, "nmt.spm.en.model does not match nmt.vocab.fr.txt"),
        ({**meta, "target_spm": "nmt.spm.bad.model"}, "cannot load "),
    ]
    for broken, message in cases:
        (tmp_path / "nmt.onnx.json").write_text(json.dumps(broken), encoding="utf-8")
        stdout, stderr = io.StringIO(), io.StringIO()
        code = onnx_translate.main([str(tmp_path)], stdin=io.BytesIO(b"x\n"), stdout=stdout, stderr=stderr)
        assert code == 2 and stdout.getvalue() == ""
        [line] = stderr.getvalue().strip().splitlines()
        assert line.startswith("keras-nmt onnx-translate: error: ") and message in line, line


SELECTING_BEAM, SHORTLIST = 3, (5, 2)


def test_selection_and_int8_export_of_a_sentencepiece_run(tiny_spm_selecting_export, translator,
                                                           sentences):
    """The open-vocabulary run through the fastest paths: a SavedModel and ONNX that decode
    over a shortlist of pieces, and the int8 ONNX model, all with the run's SentencePiece
    models."""
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    export = tiny_spm_selecting_export
    meta = json.loads((onnx_files(export) / "nmt.onnx.json").read_text(encoding="utf-8"))
    assert meta["tokenizer"] == "sentencepiece" and meta["shortlist"] == list(SHORTLIST)
    assert meta["int8"]["model"] == "nmt.int8.onnx" and sum(meta["int8"]["quantized_ops"].values()) > 0
    # One batch, as the SavedModel gets them: a batch's candidates are those of its sentences,
    # so a score depends on the batch (Translator's batches hold 32 sentences).
    lines = sentences[:32]
    selected = translator.translate(lines, beam_size=SELECTING_BEAM, shortlist=SHORTLIST)
    assert meta["inputs"][-2:] == ["shortlist_frequent", "shortlist_best"]
    # Every piece said is a candidate of some sentence: a reserved or frequent piece, or
    # one of the best translations of a source piece.
    allowed = shortlist_candidates(translator, lines, SHORTLIST)
    assert all(set(translator.target_vocab.encode(t.tokens)) <= words
               for t, words in zip(selected, allowed))
    # The shortlist leaves pieces out for the sentences without a piece training saw at
    # most twice (on 400 pairs, 14 of these 32).
    assert sum(len(words) < len(translator.target_vocab) for words in allowed) >= 10
    out = check_selecting_export(export, lines, selected, SELECTING_BEAM)
    int8 = OnnxTranslator.from_export_dir(export, int8=True).translate(lines, shortlist=True)
    assert [t.text for t in int8] == out
