"""--tokenizer sentencepiece: the model's reserved ids, graph/Python parity token for
token, and a run directory that trains, translates and is enough on its own."""

import json
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_nmt.rundir.run_directory import RunDir
from keras_nmt.core.errors import CodecError
from keras_nmt.text import codecs
from keras_nmt.text.sentencepiece import MODEL_TYPES, SentencePieceCodec, train_sentencepiece
from keras_nmt.text.sentencepiece_graph import SentencePieceEncoder
from keras_nmt.core.constants import EOS_ID, PAD_ID, RESERVED, UNK_ID

SAMPLES = [
    "L'homme n'est pas là ; aujourd'hui, c'est « fini » !",
    "Don't go: John's 1990's cars cost $1,000.50 (or 3.5%).",
    "Prix\u00a0: 12\u202f€ — «\u00a0oui\u00a0» ?",
    "Το σπίτι είναι μεγάλο. Дом большой. 東京は大きい。",
    "ÉCOLE École école… ça, ÇA ?! 2024-11-22 10:30",
    "   leading and trailing spaces   ",
    "tab\tseparated\u2028line",
    "",
    "emoji 🙂 and a rare letter ʬ",
]
ALPHABET = "abcdefghéèàçôABCÉ0123456789 '’.,;:!?-«»\u00a0\u202f()€$%ΑβДж東京\t"


@pytest.fixture(scope="module", params=MODEL_TYPES)
def trained(tiny_corpus, request):
    """A 300-piece model (unigram, then BPE) trained on the tiny corpus's French side plus
    mixed text."""
    lines = (tiny_corpus / "train.fr").read_text(encoding="utf-8").splitlines()
    model = train_sentencepiece(lines + SAMPLES[:5] * 3, 300, request.param)
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto.FromString(model)
    assert proto.trainer_spec.model_type == proto.trainer_spec.ModelType.Value(request.param.upper())
    return model


def random_lines(count, seed=5):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(count)]


def test_model_reserves_the_project_ids(trained):
    model = SentencePieceCodec(trained, "fr")
    assert model.vocabulary.tokens[:4] == RESERVED
    assert 200 <= len(model.vocabulary) <= 300
    assert UNK_ID in model.encode("ʬ") and UNK_ID not in model.encode("東京")  # unseen, seen
    assert all(i > EOS_ID or i == UNK_ID for i in model.encode(SAMPLES[0]))


def test_graph_and_python_agree_token_for_token(trained):
    python = SentencePieceCodec(trained, "fr")
    graph = SentencePieceEncoder(trained, "fr")
    lines = SAMPLES + random_lines(200)
    graph_ids = graph(tf.constant(lines)).to_list()
    for line, ids in zip(lines, graph_ids):
        assert ids[:-1] == python.encode(line), line
        assert ids[-1] == EOS_ID
        assert python.vocabulary.encode(python.tokenize(line)) == python.encode(line)
    # Decoding: rows padded with PAD after EOS, with BOS in front, decode alike.
    rows = [[2] + ids + [PAD_ID] * (3 + i % 4) for i, ids in enumerate(graph_ids)]
    width = max(len(r) for r in rows)
    dense = tf.constant([r + [PAD_ID] * (width - len(r)) for r in rows], tf.int32)
    decoded = [t.decode("utf-8") for t in graph.decode(dense).numpy()]
    assert decoded == [python.decode(r) for r in rows]
    assert python.decode(python.encode(SAMPLES[0])) == SAMPLES[0]
    assert python.detokenize(python.tokenize(SAMPLES[1])) == SAMPLES[1]


def test_graph_codec_carries_its_model_into_a_savedmodel(trained, tmp_path):
    """The module owns the SentencePiece resource: a SavedModel that tracks it encodes and
    decodes after loading, with nothing else at hand."""

    class Endpoints(tf.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def encode(self, lines):
            return self.encoder(lines).to_tensor()

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
        def decode(self, ids):
            return self.encoder.decode(ids)

    tf.saved_model.save(Endpoints(SentencePieceEncoder(trained, "fr")), str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    ids = loaded.encode(tf.constant([SAMPLES[0]]))
    assert ids.numpy()[0].tolist() == SentencePieceCodec(trained, "fr").encode(SAMPLES[0]) + [EOS_ID]
    assert loaded.decode(ids).numpy()[0].decode("utf-8") == SAMPLES[0]


def test_bad_models_and_settings_are_refused(tmp_path):
    with pytest.raises(CodecError, match="SentencePiece model not found"):
        SentencePieceCodec.load(tmp_path / "missing.model", "en")
    with pytest.raises(CodecError, match="unknown tokenizer 'bpe'"):
        codecs.check_kind("bpe", "data.json")
    with pytest.raises(CodecError, match="unknown tokenizer 'bpe'"):
        codecs.make_codec("bpe", "en", None)
    # Runs made before data.json named a tokenizer are word runs.
    run = RunDir(tmp_path)
    run.data_path.write_text(json.dumps({"src": "en", "tgt": "fr"}))
    assert run.tokenizer() == codecs.WORD


@pytest.fixture(scope="module")
def spm_run(tiny_spm_run):
    """The conftest run (token batching rides along: it trains on batches of <= 200
    slots) and its summary."""
    return tiny_spm_run, json.loads((tiny_spm_run / "summary.json").read_text(encoding="utf-8"))


def test_sentencepiece_run_directory(spm_run):
    from keras_nmt.decoding.keras_translator import Translator

    out, summary = spm_run
    info = json.loads((out / "data.json").read_text())
    config = json.loads((out / "config.json").read_text())
    assert info["tokenizer"] == "sentencepiece"
    source, target = RunDir(out).codecs()
    assert isinstance(source, SentencePieceCodec) and source.lang == "en"
    assert len(source.vocabulary) == config["src_vocab_size"] <= 120
    assert len(target.vocabulary) == config["tgt_vocab_size"] <= 150
    assert (out / "vocab.fr.txt").read_text(encoding="utf-8").splitlines() == list(target.vocabulary.tokens)
    assert summary["config"]["batch_tokens"] == 200 and summary["updates"] == 3
    assert summary["config"]["label_smoothing"] == 0.1  # a smoothed loss over pieces
    # The training scan counted pieces: more of them than words.
    assert summary["data"]["train"]["source_tokens"] > summary["data"]["train"]["pairs"] * 3
    # Subword regularisation: two sampled copies, recorded, with the default smoothing.
    assert (info["subword_samples"], info["subword_alpha"]) == (2, 0.1)
    assert info["options"]["subword_samples"] == 2
    split = RunDir(out).prepared_split(needed_for="a test")
    assert split.copies == 2 and split.info["samples"]["seed"] == config["seed"]
    sampled = split.gather(np.arange(split.count), np.ones(split.count, np.int64))
    assert not np.array_equal(sampled[0], split.gather(np.arange(split.count))[0])

    graph_source, graph_target = RunDir(out).graph_encoders()
    assert graph_source(tf.constant(["The man is here."])).to_list()[0][:-1] == source.encode("The man is here.")
    assert graph_target.vocab_size == len(target.vocabulary)

    translator = Translator.from_run_dir(out)
    line = "The man is here."
    (result,) = translator.translate([line], beam_size=2)
    assert list(result.source_tokens) == source.tokenize(line)
    assert result.text == target.detokenize(result.tokens)
    assert "▁" not in result.text


def test_translate_cli_needs_only_the_run_directory(spm_run, tmp_path, cli_runner):
    out, _ = spm_run
    alone = tmp_path / "copied-run"
    shutil.copytree(out, alone)
    result = cli_runner("translate", alone, "--beam", "2", stdin="The man is here.\n\nThe dog.\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert "▁" not in result.stdout


def test_a_joint_vocabulary_is_one_model_of_both_sides(tiny_corpus, tmp_path):
    from keras_nmt.runner import run_data
    from keras_nmt.core.config import variant_config
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.core.errors import ConfigError
    from keras_nmt.core.progress import Progress
    from keras_nmt.runner.train_options import TrainOptions

    train = ParallelFiles(tiny_corpus / "train.en", tiny_corpus / "train.fr")
    lines = len((tiny_corpus / "train.en").read_text(encoding="utf-8").splitlines())
    options = TrainOptions(src="en", tgt="fr", tokenizer="sentencepiece", joint_vocabulary=True)
    config = variant_config("search30", {"src_vocab_size": 200, "tgt_vocab_size": 200})
    run = RunDir(tmp_path / "run")
    run.create()
    models = run_data.sentencepiece_models(options, config, train, lines, run, Progress(enabled=False))
    assert models["en"] == models["fr"]
    assert run.sentencepiece_path("en").read_bytes() == run.sentencepiece_path("fr").read_bytes()
    english, french = (SentencePieceCodec(models[lang], lang) for lang in ("en", "fr"))
    pieces = set(english.vocabulary.tokens)
    # Pieces of both languages: words of the English side and accented French letters.
    assert {"▁the", "é"} <= pieces or {"▁The", "é"} <= pieces, sorted(pieces)[:50]
    # A name is cut the same way on either side, so the attention can copy it.
    assert english.encode("Mr. Brownlow 1987") == french.encode("Mr. Brownlow 1987")
    other = RunDir(tmp_path / "separate")
    other.create()
    separate = run_data.sentencepiece_models(
        TrainOptions(src="en", tgt="fr", tokenizer="sentencepiece"), config, train, lines,
        other, Progress(enabled=False))
    assert separate["en"] != separate["fr"]
    with pytest.raises(ConfigError, match="give one size"):
        run_data.sentencepiece_models(options, config.replace(tgt_vocab_size=300), train, lines,
                                      run, Progress(enabled=False))


def test_a_run_s_sentencepiece_type_chooses_its_models(tiny_corpus, tmp_path):
    from sentencepiece import sentencepiece_model_pb2

    from keras_nmt.runner import run_data
    from keras_nmt.core.config import variant_config
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.core.progress import Progress
    from keras_nmt.runner.train_options import TrainOptions

    train = ParallelFiles(tiny_corpus / "train.en", tiny_corpus / "train.fr")
    lines = len((tiny_corpus / "train.en").read_text(encoding="utf-8").splitlines())
    options = TrainOptions(src="en", tgt="fr", tokenizer="sentencepiece", sentencepiece_type="bpe")
    config = variant_config("search30", {"src_vocab_size": 150, "tgt_vocab_size": 150})
    run = RunDir(tmp_path / "run")
    run.create()
    models = run_data.sentencepiece_models(options, config, train, lines, run, Progress(enabled=False))
    for model in models.values():
        spec = sentencepiece_model_pb2.ModelProto.FromString(model).trainer_spec
        assert spec.model_type == spec.ModelType.Value("BPE")


def test_the_training_sample_is_drawn_with_the_seed(tiny_corpus):
    """A training side larger than the sample: the sample, so the model, is a function of
    the seed (SentencePiece's own sampler drew anew in every process)."""
    from keras_nmt.text.sentencepiece import uniform_sample

    lines = (tiny_corpus / "train.fr").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 400
    for model_type in MODEL_TYPES:
        first, again, other = (train_sentencepiece(lines, 150, model_type, seed=seed,
                                                   sample_size=100) for seed in (1, 1, 2))
        assert first == again, model_type
        assert first != other, model_type
    items = [str(i) for i in range(1000)]
    sample = uniform_sample(iter(items), 50, seed=3)
    assert len(set(sample)) == 50 and set(sample) <= set(items)
    assert sample == uniform_sample(items, 50, seed=3) != uniform_sample(items, 50, seed=4)
    assert uniform_sample(items[:20], 50, seed=3) == items[:20]  # fewer: all of them
    # Uniform: over 2,000 seeds each of 20 items is kept about 2,000 x 5 / 20 = 500 times.
    kept = np.zeros(20, int)
    for seed in range(2000):
        kept[[int(i) for i in uniform_sample(items[:20], 5, seed)]] += 1
    assert kept.sum() == 10_000 and kept.min() > 420 and kept.max() < 580, kept


def test_a_run_s_models_follow_its_seed(tiny_corpus, tmp_path, monkeypatch):
    """Training runs with one --seed cut their text into the same pieces; the run's seed
    reaches the sample (made small here, so that the 400 lines exceed it)."""
    import functools

    from keras_nmt.runner import run_data
    from keras_nmt.core.config import variant_config
    from keras_nmt.corpus.readers import ParallelFiles
    from keras_nmt.core.progress import Progress
    from keras_nmt.runner.train_options import TrainOptions

    monkeypatch.setattr(run_data, "train_sentencepiece",
                        functools.partial(train_sentencepiece, sample_size=100))
    train = ParallelFiles(tiny_corpus / "train.en", tiny_corpus / "train.fr")
    options = TrainOptions(src="en", tgt="fr", tokenizer="sentencepiece")

    def models(seed, name):
        config = variant_config("search30", {"src_vocab_size": 150, "tgt_vocab_size": 150,
                                             "seed": seed})
        run = RunDir(tmp_path / name)
        run.create()
        return run_data.sentencepiece_models(options, config, train, 400, run,
                                             Progress(enabled=False))

    first = models(7, "first")
    assert models(7, "again") == first
    other = models(8, "other")
    assert other["en"] != first["en"] and other["fr"] != first["fr"]
