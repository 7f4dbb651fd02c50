"""Constrained decoding on the export paths: the SavedModel's translate_ids_constrained (TF1
loader, as TF Serving loads it), NAME.constrained.onnx through OnnxTranslator and
onnx-translate, and the int8 selecting variant, against the Keras Translator; an export
without the constrained model refuses constraints in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from keras_nmt.decoding.constraints import Glossary, LineConstraints
from keras_nmt.core.errors import ExportError
from keras_nmt.export import exporter
from keras_nmt.export.savedmodel import ExportSettings, signature_summary
from keras_nmt.export.serving_files import serving_md
from support import onnx_files, peaked_weights_run

LINES = ["The man is here.", "A dog sleeps on the table.", "The cat eats .",
         "The man is here. A dog sleeps on the table."]
BEAM = 3


def export(run, out, *options):
    from keras_nmt.cli import export as cli

    assert cli.main([str(run), "--out", str(out), "--beam", str(BEAM), "--onnx",
                     "--constrained", "--quiet", *options]) == 0
    return out


@pytest.fixture(scope="module")
def peaked_run(tiny_run, tmp_path_factory):
    """tiny_run with peaked random weights: outputs of several words, unlike a barely
    trained model's."""
    return peaked_weights_run(tiny_run, tmp_path_factory.mktemp("peaked") / "run")


@pytest.fixture(scope="module")
def constrained_export(peaked_run, tmp_path_factory):
    """The peaked run exported with --onnx --constrained (exact search)."""
    return export(peaked_run, tmp_path_factory.mktemp("constrained"))


@pytest.fixture(scope="module")
def translator(peaked_run):
    from keras_nmt.decoding.keras_translator import Translator

    return Translator.from_run_dir(peaked_run)


def absent_words(translator, lines, count):
    """Alphabetic target words that none of the plain translations of ``lines`` holds."""
    said = {w for t in translator.translate(lines, beam_size=BEAM) for w in t.tokens}
    return [w for w in translator.target_vocab.tokens[4:] if w.isalpha() and w not in said
            ][:count]


def line_constraints(translator) -> list[LineConstraints]:
    a, b, c, d = absent_words(translator, LINES, 4)
    [plain] = translator.translate(LINES[1:2], beam_size=BEAM)
    return [LineConstraints((a,)), LineConstraints((f"{b} {c}",), avoid=(plain.tokens[0],)),
            LineConstraints(prefix=d), None]


def meets(tokens, found: LineConstraints) -> bool:
    text = " ".join(tokens)
    return (all(p in text for p in found.include)
            and not any(p in tokens for p in found.avoid)
            and text.startswith(found.prefix))


# The default run: no conversion.

def test_the_summary_and_serving_md_name_the_constrained_signature_and_model():
    settings = ExportSettings(beam_size=3, alpha=1.0)
    assert "translate_ids_constrained" not in signature_summary(settings)
    summary = signature_summary(ExportSettings(beam_size=3, alpha=1.0, constrained=True))
    assert "`include_ids` int32 [N, P, L]" in summary["translate_ids_constrained"]
    assert "`unmet` int32 [N, n]" in summary["translate_ids_constrained"]
    assert "nmt.constrained.onnx" in serving_md("nmt", 1, summary, onnx=True, constrained=True)
    assert "nmt.constrained.onnx" not in serving_md("nmt", 1, summary, onnx=True)


def test_an_export_without_the_constrained_model_refuses_constraints(tiny_export, tmp_path,
                                                                     cli_runner):
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    translator = OnnxTranslator.from_export_dir(tiny_export)
    assert not translator.constrains
    for asked in (dict(constraints=[LineConstraints(("chien",))]),
                  dict(glossary=Glossary((("dog", "chien"),)))):
        with pytest.raises(ExportError, match="no constrained model: export the run again "
                                              "with --onnx --constrained"):
            translator.translate(["A dog."], **asked)
    assert translator.translate(["A dog."])[0].text  # the plain path is untouched
    prefixes = tmp_path / "p.txt"
    prefixes.write_text("chien\n")
    ran = cli_runner("onnx-translate", tiny_export, "--prefix", prefixes, stdin="A dog.\n")
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and "has no constrained model" in ran.stderr


# The exports (conversions: minutes).

@pytest.mark.slow
def test_keras_savedmodel_and_onnx_give_the_same_constrained_translations(
        constrained_export, translator):
    import tensorflow_text  # noqa: F401

    from keras_nmt.export import parity
    from keras_nmt.export.loaders import SessionModel
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    found = line_constraints(translator)
    keras = translator.translate(LINES, beam_size=BEAM, constraints=found)
    assert all(meets(t.tokens, c) for t, c in zip(keras, found) if c)
    assert keras[3].text == translator.translate(LINES[3:], beam_size=BEAM)[0].text
    onnx = OnnxTranslator.from_export_dir(constrained_export)
    assert onnx.constrains
    served = onnx.translate(LINES, beam_size=BEAM, constraints=found)
    assert [t.text for t in served] == [t.text for t in keras]
    np.testing.assert_allclose([t.score for t in served], [t.score for t in keras], atol=1e-4)
    # The SavedModel's ids signature in the TF1 session loader (TF Serving's), each line whole.
    whole = translator.translate(LINES[:3], beam_size=BEAM, constraints=found[:3],
                                 split_sentences=False)
    session = SessionModel(constrained_export / "nmt" / "1")
    try:
        decoded = parity.run_ids(
            lambda feeds: session.run("translate_ids_constrained", **feeds),
            translator.encode(LINES[:3]), translator.target_vocab, BEAM, 1.0,
            constraints=exporter._sentence_constraints(translator, found[:3]))
        # The string signature: phrases as text, tokenized in the graph.
        rules = [c or LineConstraints() for c in found[:3]]
        strings = session.run(
            "translate_constrained", sentences=np.array(LINES[:3], object),
            include=np.array([list(c.include) or [""] for c in rules], object),
            avoid=np.array([list(c.avoid) or [""] for c in rules], object),
            prefix=np.array([c.prefix for c in rules], object))
    finally:
        session.close()
    assert [d.tokens for d in decoded] == [t.tokens for t in whole]
    assert [t.decode() for t in strings["translations"]] == [t.text for t in whole]
    assert strings["unmet"].tolist() == [0, 0, 0]
    # A glossary term on a split line lands in the sentence of its source term.
    [plain] = translator.translate(LINES[3:], beam_size=BEAM)
    [term] = absent_words(translator, LINES, 5)[4:]
    glossary = Glossary((("dog", term),))
    [keras] = translator.translate(LINES[3:], beam_size=BEAM, glossary=glossary)
    [served] = onnx.translate(LINES[3:], beam_size=BEAM, glossary=glossary)
    assert served.text == keras.text and term in served.sentences[1].tokens
    assert served.sentences[0].text == plain.sentences[0].text
    metadata = json.loads((onnx_files(constrained_export) / "nmt.onnx.json").read_text())
    assert metadata["constrained"]["model"] == "nmt.constrained.onnx"
    assert metadata["constrained"]["inputs"][-3:] == ["include_ids", "avoid_ids", "prefix_ids"]
    serving = (constrained_export / "SERVING.md").read_text()
    assert "`translate_ids_constrained`" in serving and "nmt.constrained.onnx" in serving


@pytest.mark.slow
def test_onnx_translate_takes_constraints_prefixes_and_a_glossary(constrained_export,
                                                                  translator, cli_runner,
                                                                  tmp_path):
    first, *_ = absent_words(translator, LINES, 3)
    text = "The man is here.\nA dog.\n\n"
    constraints = tmp_path / "c.jsonl"
    constraints.write_text(json.dumps([first]) + "\n\n" + json.dumps([first]) + "\n")
    ran = cli_runner("onnx-translate", constrained_export, "--constraints", constraints,
                     "--beam", BEAM, stdin=text)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert first in lines[0].split() and first not in lines[1].split() and lines[2] == ""
    assert "1 line(s) miss a constraint" in ran.stderr  # the empty line's
    keras = translator.translate(text.splitlines(), beam_size=BEAM,
                                 constraints=[LineConstraints((first,)), None,
                                              LineConstraints((first,))])
    assert lines == [t.text for t in keras]
    prefixes = tmp_path / "p.txt"
    prefixes.write_text(f"{first}\n\n\n")
    ran = cli_runner("onnx-translate", constrained_export, "--prefix", prefixes, stdin=text)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[0].split()[0] == first
    glossary = tmp_path / "g.tsv"
    glossary.write_text(f"dog\t{first}\n")
    ran = cli_runner("onnx-translate", constrained_export, "--glossary", glossary, stdin=text)
    one, two, _ = ran.stdout.splitlines()
    assert first not in one.split() and first in two.split()
    constraints.write_text("[\"a\"]\n")
    ran = cli_runner("onnx-translate", constrained_export, "--constraints", constraints,
                     stdin=text)
    assert ran.returncode == 2
    assert "the constraints file has 1 line(s), the input more" in ran.stderr


@pytest.mark.slow
def test_the_int8_selecting_constrained_model_meets_the_constraints(tiny_run, tmp_path):
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    out = export(tiny_run, tmp_path / "export", "--shortlist", "5,2", "--int8")
    metadata = json.loads((onnx_files(out) / "nmt.onnx.json").read_text())
    assert metadata["int8"]["constrained"] == "nmt.constrained.int8.onnx"
    assert "shortlist_best" in metadata["constrained"]["inputs"]
    int8 = OnnxTranslator.from_export_dir(out, int8=True)
    assert int8.constrained_path.name == "nmt.constrained.int8.onnx"
    # Words outside the shortlist of these sentences: the graph keeps them all the same.
    vocab = int8.target_vocab.tokens
    words = [w for w in vocab[len(vocab) // 2 :] if w.isalpha()][:3]
    found = [LineConstraints((words[0],)), LineConstraints((f"{words[1]} {words[2]}",)),
             LineConstraints(prefix=words[2], avoid=(words[0],))]
    out8 = int8.translate(LINES[:3], constraints=found)
    assert all(meets(t.tokens, c) for t, c in zip(out8, found)), [t.text for t in out8]
    assert all(t.unmet == () for t in out8)
    # The prefix's loop reads the encoder's memory too: no weight the plain int8 model
    # quantizes stays float in the constrained one.
    import onnx

    def float_matrices(path):
        return {i.name for i in onnx.load(str(path)).graph.initializer
                if i.data_type == onnx.TensorProto.FLOAT and len(i.dims) == 2}

    plain = float_matrices(onnx_files(out) / "nmt.int8.onnx")
    assert float_matrices(onnx_files(out) / "nmt.constrained.int8.onnx") <= plain
