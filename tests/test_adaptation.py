"""train --init-from: a run that starts from another's weights. The vocabulary update,
the rows copied, the frozen parts, the pull toward the parent, the parent's pairs mixed
in (--mix), a second domain reported (--also-report), a child trained, translated,
resumed and served beside its parent, and the one-line errors.

The parent is the session's ``tiny_run`` (read only) or a copy of it; the new data is
``tiny_corpus``'s first pairs with invented words (``new_corpus``)."""

import json
import shutil
import signal
import sys

import numpy as np
import pytest

from support import (
    FIXED_BATCH_SETTINGS, ROOT, ServerThread, child_env, edit_json, fixed_batches, run_logged,
    tiny_args,
)

# The invented words of new_corpus, each side's twice or more (so vocab_min_count=2
# keeps them), and one pair seen once (so it reads as <unk> there and gets a dictionary
# entry).
NEW_WORDS = [("zorblax", "zorblaxe"), ("quintel", "quintelle"), ("morvath", "morvathe")]
ONCE = ("blorptic", "blorptique")


@pytest.fixture(scope="module")
def new_corpus(tiny_corpus, tmp_path_factory):
    """120 / 20 / 20 pairs of tiny_corpus, every other one after a short sentence with a
    new word, and one training pair with a word seen once."""
    out = tmp_path_factory.mktemp("new-corpus")
    for split, count in (("train", 120), ("valid", 20), ("test", 20)):
        source = (tiny_corpus / f"{split}.en").read_text(encoding="utf-8").splitlines()[:count]
        target = (tiny_corpus / f"{split}.fr").read_text(encoding="utf-8").splitlines()[:count]
        for i in range(0, count, 2):
            word, translation = NEW_WORDS[i // 2 % len(NEW_WORDS)]
            source[i] = f"The {word} sings. {source[i]}"
            target[i] = f"Le {translation} chante. {target[i]}"
        if split == "train":
            source[1], target[1] = f"The {ONCE[0]} sings.", f"Le {ONCE[1]} chante."
        (out / f"{split}.en").write_text("\n".join(source) + "\n", encoding="utf-8")
        (out / f"{split}.fr").write_text("\n".join(target) + "\n", encoding="utf-8")
    return out


@pytest.fixture
def run_train(cli_runner):
    return lambda *args: cli_runner("train", *args, prog="train.py")


def assert_refused(result, *expected):
    """One error line, the last on stderr, that says each of ``expected``."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert [line for line in lines if line.startswith("train.py")] == lines[-1:], lines
    assert lines[-1].startswith("train.py: error: "), lines
    assert all(text in lines[-1] for text in expected), lines[-1]
    assert "Traceback" not in result.stderr


def model_at(run_dir, checkpoint):
    """The model of ``run_dir`` with the weights of ``checkpoint`` (a prefix), by path."""
    from keras_nmt.rundir import model_weights
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir

    model = TranslationModel(RunDir(run_dir).load_config())
    model_weights.read_model(str(checkpoint), model)
    return {path: variable.numpy()
            for path, variable in model_weights.model_variables(model).items()}


def optimizer_updates(checkpoint):
    """The update count of the optimizer a training checkpoint (a prefix) holds."""
    import tensorflow as tf

    return int(tf.train.load_variable(str(checkpoint),
                                      "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"))


def tiny_model(**settings):
    import keras

    from keras_nmt.core.config import variant_config
    from keras_nmt.models.rnnsearch import TranslationModel

    keras.utils.set_random_seed(3)
    values = {**FIXED_BATCH_SETTINGS, **settings}
    return TranslationModel(variant_config(values.pop("variant", "search50"), values))


# ---------------------------------------------------------------- the vocabulary update

def test_a_childs_vocabulary_is_the_parents_then_the_frequent_new_words():
    from keras_nmt.runner.adaptation import extended_vocabulary
    from keras_nmt.core.constants import RESERVED
    from keras_nmt.text.vocab import Vocabulary

    parent = Vocabulary(list(RESERVED) + ["the", "cat", "sat"])
    counts = {"dog": 5, "the": 9, "emu": 5, "gnu": 1, "yak": 3, "cat": 1}
    child = extended_vocabulary(parent, counts, size=10, min_count=2)
    # The parent's ids are the same words, seen or not; then by count, ties by the word.
    assert child.tokens == parent.tokens + ("dog", "emu", "yak")
    assert extended_vocabulary(parent, counts, size=9, min_count=2).tokens == \
        parent.tokens + ("dog", "emu")
    assert extended_vocabulary(parent, counts, size=7, min_count=1).tokens == parent.tokens


# ---------------------------------------------------------------- the weights a child takes

@pytest.mark.parametrize("variant", ["search50", "encdec50"])
def test_the_weights_indexed_by_word_are_the_ones_the_update_extends(variant):
    """Every weight with an axis of a vocabulary's size is listed, with its side and axis
    (the sizes are chosen so that no other dimension equals them)."""
    from keras_nmt.runner.adaptation import VOCABULARY_WEIGHTS
    from keras_nmt.rundir.model_weights import model_variables

    model = tiny_model(variant=variant, src_vocab_size=37, tgt_vocab_size=41)
    sizes = {"source": 37, "target": 41}
    found = {}
    for path, variable in model_variables(model).items():
        for axis, size in enumerate(variable.shape):
            for side, vocab_size in sizes.items():
                if size == vocab_size:
                    found[path] = (side, axis)
    assert found == VOCABULARY_WEIGHTS


@pytest.mark.parametrize("variant", ["search50", "encdec50"])
def test_every_weight_is_in_exactly_one_part_that_freeze_names(variant):
    from keras_nmt.runner.adaptation import PARTS, part_of
    from keras_nmt.core.config import FREEZABLE
    from keras_nmt.rundir.model_weights import model_variables

    assert tuple(sorted(name for name, _ in PARTS)) == tuple(sorted(FREEZABLE))
    parts = {path: part_of(path) for path in model_variables(tiny_model(variant=variant))}
    assert parts["decoder/readout/output_kernel"] == "output"
    assert parts["decoder/readout/state_kernel"] == "readout"
    assert parts["decoder/embedding/_embeddings"] == "embeddings"
    assert parts["encoder/forward_rnn/cell/kernel"] == "encoder"
    assert parts["decoder/cell/recurrent_kernel"] == "decoder"
    expected = set(FREEZABLE) - ({"attention"} if variant.startswith("encdec") else set())
    assert set(parts.values()) == expected


def test_a_child_copies_the_parents_rows_and_starts_new_words_as_unk():
    from keras_nmt.runner.adaptation import initialize
    from keras_nmt.core.constants import RESERVED, UNK_ID
    from keras_nmt.rundir.model_weights import model_variables
    from keras_nmt.text.vocab import Vocabulary

    parent_vocabs = tuple(Vocabulary(list(RESERVED) + [f"{side}{i}" for i in range(6)])
                          for side in "st")
    vocabs = (Vocabulary(parent_vocabs[0].tokens + ("new",)),
              Vocabulary(parent_vocabs[1].tokens + ("n1", "n2", "n3")))
    parent = tiny_model()
    child = tiny_model(src_vocab_size=11, tgt_vocab_size=13)
    initialize(child, parent, parent_vocabs, vocabs)
    theirs = {path: v.numpy() for path, v in model_variables(parent).items()}
    ours = {path: v.numpy() for path, v in model_variables(child).items()}
    for path in set(theirs) - {"encoder/embedding/_embeddings", "decoder/embedding/_embeddings",
                               "decoder/readout/output_kernel", "decoder/readout/output_bias"}:
        assert np.array_equal(ours[path], theirs[path]), path
    # The parent's rows exactly, then copies of <unk>'s; the bias lowered by log 3.
    source = ours["encoder/embedding/_embeddings"]
    assert np.array_equal(source[:10], theirs["encoder/embedding/_embeddings"])
    assert np.array_equal(source[10], theirs["encoder/embedding/_embeddings"][UNK_ID])
    target = ours["decoder/embedding/_embeddings"]
    assert np.array_equal(target[:10], theirs["decoder/embedding/_embeddings"])
    assert np.array_equal(target[10:], np.repeat(target[UNK_ID:UNK_ID + 1], 3, axis=0))
    kernel = ours["decoder/readout/output_kernel"]
    assert np.array_equal(kernel[:, :10], theirs["decoder/readout/output_kernel"])
    assert np.array_equal(kernel[:, 12], kernel[:, UNK_ID])
    bias = ours["decoder/readout/output_bias"]
    assert np.array_equal(bias[:10], theirs["decoder/readout/output_bias"])
    np.testing.assert_allclose(bias[10:], bias[UNK_ID] - np.log(3.0), rtol=1e-6)
    # The new words together are as likely as <unk> is, wherever the model is.
    hidden = np.random.default_rng(0).normal(size=(5, kernel.shape[0])).astype(np.float32)
    logits = hidden @ kernel + bias
    np.testing.assert_allclose(np.exp(logits[:, 10:]).sum(1), np.exp(logits[:, UNK_ID]),
                               rtol=1e-5)
    with pytest.raises(Exception, match="does not begin with its parent's words"):
        initialize(child, parent, parent_vocabs,
                   (Vocabulary(list(RESERVED) + ["new"] + [f"s{i}" for i in range(6)]),
                    vocabs[1]))


# ---------------------------------------------------------------- freeze and pull

def test_frozen_parts_are_bit_identical_and_get_no_optimizer_state(tmp_path):
    """Adam with a freeze: the frozen weights come out of the updates bit for bit, and
    the optimizer holds no state for them."""
    import keras

    from keras_nmt.runner.adaptation import part_of, setup_training
    from keras_nmt.core.config import variant_config
    from keras_nmt.rundir.model_weights import model_variables
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.training import TrainingBudget, Trainer

    keras.utils.set_random_seed(0)
    config = variant_config("search50", {**FIXED_BATCH_SETTINGS, "optimizer": "adam",
                                         "learning_rate": 0.05,
                                         "freeze": "embeddings,attention,output"})
    model = TranslationModel(config)
    variables, pull = setup_training(model, config, {})
    assert pull is None
    paths = model_variables(model)
    before = {path: v.numpy().copy() for path, v in paths.items()}
    trainer = Trainer(config, model, RunDir(tmp_path), fixed_batches(),
                      lambda: fixed_batches().take(1), train_pairs=2, variables=variables)
    trainer.fit(TrainingBudget(max_steps=4))
    frozen = {path for path in paths if part_of(path) in config.frozen_parts}
    assert {"decoder/readout/output_kernel", "decoder/attention/key_kernel",
            "encoder/embedding/_embeddings"} <= frozen
    for path, variable in paths.items():
        changed = not np.array_equal(variable.numpy(), before[path])
        assert changed == (path not in frozen), path
    kept = {id(v) for v in trainer.optimizer._trainable_variables}
    assert kept == {id(v) for path, v in paths.items() if path not in frozen}


def test_the_pull_gradient_is_strength_times_the_distance_on_the_parents_rows():
    import tensorflow as tf

    from keras_nmt.rundir.model_weights import model_variables
    from keras_nmt.training.pull import ParentPull

    model = tiny_model()
    paths = model_variables(model)
    names = ["decoder/readout/output_kernel", "encoder/embedding/_embeddings",
             "decoder/cell/bias"]
    variables = [paths[name] for name in names]
    rows = [(1, 7), (0, 6), None]  # the parent had 7 target and 6 source words
    pull = ParentPull(0.3, variables, rows)
    rng = np.random.default_rng(1)
    for variable in variables:  # training moved every weight away from the anchors
        variable.assign(variable.numpy() + rng.normal(size=variable.shape).astype(np.float32))
    with tf.GradientTape() as tape:
        penalty = pull.penalty()
    gradients = tape.gradient(penalty, variables)
    distance = [v.numpy() - a.numpy() for v, a in zip(variables, pull.anchors)]
    masks = [np.zeros(variable.shape) for variable in variables[:2]]
    masks.append(np.ones(variables[2].shape))
    masks[0][:, :7] = 1
    masks[1][:6] = 1
    for gradient, d, mask in zip(gradients, distance, masks):
        np.testing.assert_allclose(tf.convert_to_tensor(gradient).numpy(), 0.3 * d * mask,
                                   rtol=1e-5, atol=1e-7)
    expected = 0.15 * sum(float(np.sum((d * mask) ** 2)) for d, mask in zip(distance, masks))
    np.testing.assert_allclose(float(penalty), expected, rtol=1e-5)


def test_the_pull_changes_an_update_as_its_formula_says():
    """One SGD update with the pull against one without, from the same weights: the
    difference is -learning_rate x strength x (w - w_parent) on the parent's rows, and
    nothing on a new word's."""
    import tensorflow as tf

    from keras_nmt.core.config import variant_config
    from keras_nmt.rundir.model_weights import model_variables
    from keras_nmt.training.optimizers import make_optimizer
    from keras_nmt.training.pull import ParentPull
    from keras_nmt.training.steps import StepFunctions

    settings = {"optimizer": "sgd", "learning_rate": 0.1, "clipnorm": 1e9}
    config = variant_config("search50", {**FIXED_BATCH_SETTINGS, **settings})
    (source, target_in), target_out = next(iter(fixed_batches()))

    def one_update(strength):
        """(the weights before, the anchors, the weights after), by path."""
        model = tiny_model(**settings)  # seeded: the same weights every time
        variables = model.trainable_variables
        paths = {id(v): path for path, v in model_variables(model).items()}
        before = {paths[id(v)]: v.numpy() for v in variables}
        pull = anchors = None
        if strength:
            # The parent had 8 of the 10 target words.
            rows = [(1, 8) if paths[id(v)] == "decoder/readout/output_kernel" else None
                    for v in variables]
            pull = ParentPull(strength, variables, rows)
            for anchor in pull.anchors:  # a parent elsewhere than the start
                anchor.assign(anchor.numpy() + 0.01 * np.sign(anchor.numpy() + 1e-3))
            anchors = {paths[id(v)]: a.numpy() for v, a in zip(variables, pull.anchors)}
        optimizer = make_optimizer(config)
        optimizer.build(variables)
        steps = StepFunctions(config, model, optimizer, tf.Variable(0, dtype=tf.int64),
                              variables=variables, pull=pull)
        steps.train_step(source, target_in, target_out)
        return before, anchors, {paths[id(v)]: v.numpy() for v in variables}

    start, _, plain = one_update(0.0)
    same_start, anchors, pulled = one_update(2.0)
    for path, value in plain.items():
        assert np.array_equal(start[path], same_start[path])
        expected = -0.1 * 2.0 * (start[path] - anchors[path])
        if path == "decoder/readout/output_kernel":
            expected[:, 8:] = 0.0
        np.testing.assert_allclose(pulled[path] - value, expected, rtol=1e-3, atol=1e-6,
                                   err_msg=path)


def test_freeze_and_parent_pull_are_checked():
    from keras_nmt.core.config import variant_config
    from keras_nmt.core.errors import ConfigError

    assert variant_config("search50", {"freeze": " encoder, output,encoder"}).frozen_parts == \
        ("encoder", "output")
    for values, message in (
            ({"freeze": "encoder,wings"}, "freeze: no part named 'wings'"),
            ({"freeze": "embeddings,encoder,attention,decoder,readout,output"},
             "nothing would be trained"),
            ({"parent_pull": -1.0}, "parent_pull must be >= 0")):
        with pytest.raises(ConfigError, match=message):
            variant_config("search50", values)
    with pytest.raises(ConfigError, match="no attention to freeze"):
        variant_config("encdec50", {"freeze": "attention"})
    with pytest.raises(ConfigError, match="nothing would be trained"):
        variant_config("encdec50", {"freeze": "embeddings,encoder,decoder,readout,output"})


@pytest.mark.parametrize("recipe, overrides, warmup", [
    (None, {}, 0),                      # trained weights: no warm-up
    ("budget", {}, 200),                # the recipe's, when one is asked for
    ("budget", {"warmup_steps": 7}, 7),  # --set wins
])
def test_a_child_takes_no_warm_up_from_its_parent(run_copy, new_corpus, recipe, overrides,
                                                  warmup):
    from keras_nmt.runner.adaptation import Parent, child_config, child_options
    from keras_nmt.runner.train_options import TrainOptions

    edit_json(run_copy / "config.json", warmup_steps=50)
    parent = Parent.open(str(run_copy))
    options = child_options(TrainOptions(data=str(new_corpus), init_from=str(run_copy),
                                         recipe=recipe, overrides=overrides), parent)
    config = child_config(options, parent)
    assert (parent.config.warmup_steps, config.warmup_steps) == (50, warmup)
    assert config.learning_rate == (2e-3 if recipe else parent.config.learning_rate)


# ---------------------------------------------------------------- the parent's pairs mixed in

def test_mix_and_also_report_values_are_checked():
    from keras_nmt.core.errors import ConfigError
    from keras_nmt.runner.train_options import parse_also_report, parse_mix

    assert parse_mix("0.25") == (None, 0.25)
    assert parse_mix("runs/news:0.1") == ("runs/news", 0.1)
    assert parse_mix("a:b:0.5") == ("a:b", 0.5)  # the last colon parts the fraction
    for bad in ("0", "1", "1.5", "-0.2", "much", "runs/news:", "runs/news", "nan"):
        with pytest.raises(ConfigError, match="FRACTION must be a number between 0 and 1"):
            parse_mix(bad)
    with pytest.raises(ConfigError, match="PARENT_DATA before the colon is empty"):
        parse_mix(":0.2")
    assert parse_also_report(["news=a.en,a.fr", "web=b.en,b.fr"]) == {
        "news": ("a.en", "a.fr"), "web": ("b.en", "b.fr")}
    for bad, message in ((["news=a.en"], "give NAME=SOURCE_FILE,REFERENCE_FILE"),
                         (["=a.en,a.fr"], "give NAME=SOURCE_FILE,REFERENCE_FILE"),
                         (["a.en,a.fr"], "give NAME=SOURCE_FILE,REFERENCE_FILE"),
                         (["x=a,b", "x=c,d"], "'x' is given twice"),
                         (["held_out=a,b"], "'held_out' is the held-out split")):
        with pytest.raises(ConfigError, match=message):
            parse_also_report(bad)


@pytest.mark.parametrize("shuffle_buffer", [0, 5])
def test_each_epoch_holds_every_own_pair_and_the_next_drawn_pairs(shuffle_buffer):
    """12 own pairs and 4 drawn an epoch from 10: each epoch of 16 positions holds the
    own pairs once and 4 of the others; the others are drawn without repeats until
    all 10 have been."""
    from keras_nmt.data.pipelines import mixed_pair_indices

    windows = mixed_pair_indices(12, 4, 10, seed=3, window=8, shuffle_buffer=shuffle_buffer)
    indices, epochs = (np.concatenate(part) for part in
                       zip(*windows.take(10).as_numpy_iterator()))
    assert np.array_equal(epochs, np.repeat(np.arange(5), 16))
    drawn = []
    for epoch in range(5):
        part = indices[16 * epoch:16 * (epoch + 1)]
        assert sorted(part[part < 12]) == list(range(12))
        assert (part >= 12).sum() == 4
        drawn.append(part[part >= 12] - 12)
    assert all(0 <= j < 10 for j in np.concatenate(drawn))
    assert len(set(np.concatenate(drawn[:2]))) == 8  # 8 of the 10, none twice
    assert set(np.concatenate(drawn[:3])) == set(range(10))  # then the last 2, and again
    again = mixed_pair_indices(12, 4, 10, seed=3, window=8, shuffle_buffer=shuffle_buffer)
    assert np.array_equal(np.concatenate([w[0] for w in again.take(10).as_numpy_iterator()]),
                          indices)


def write_prepared(directory, pairs, langs=("en", "fr"), max_len=10):
    """A prepared split (keras_nmt.data.prepared's files) of ``pairs`` of id lists."""
    from keras_nmt.data.prepared import PreparedSplit

    directory.mkdir(parents=True)
    manifest = {"format": 1, "langs": list(langs), "count": len(pairs), "max_len": max_len,
                "sides": {}}
    for side, lang in enumerate(langs):
        rows = [pair[side] for pair in pairs]
        ids = np.array([token for row in rows for token in row], "<u2")
        offsets = np.concatenate([[0], np.cumsum([len(row) for row in rows])]).astype("<i8")
        (directory / f"train.{lang}.ids").write_bytes(ids.tobytes())
        (directory / f"train.{lang}.offsets").write_bytes(offsets.tobytes())
        manifest["sides"][lang] = {"dtype": "<u2", "tokens": len(ids), "vocabulary": 2000}
    (directory / "train.json").write_text(json.dumps(manifest))
    return PreparedSplit(directory, *langs)


def test_mixed_batches_hold_the_parents_pairs_at_the_fraction(tmp_path):
    """60 own pairs (source 4.. 100+i) and 20 an epoch of 50 others (6 1000+j), a
    quarter of each epoch: the first epoch's batches (unshuffled, sort_batches=1) hold
    exactly 20 of the others' pairs, each read whole and right; a checkpoint of the
    iterator continues with the same batches."""
    import tensorflow as tf

    from keras_nmt.core.constants import EOS_ID
    from keras_nmt.data.pipelines import Batching, prepared_batches
    from keras_nmt.data.prepared import MixedSplit, PreparedSplit

    own = [([4] * (1 + i % 3) + [100 + i], [5, 100 + i]) for i in range(60)]
    others = [([6, 1000 + j], [7] * (1 + j % 4) + [1000 + j]) for j in range(50)]

    write_prepared(tmp_path / "own", own)
    write_prepared(tmp_path / "other", others)

    def batches():
        split = MixedSplit(PreparedSplit(tmp_path / "own", "en", "fr"),
                           PreparedSplit(tmp_path / "other", "en", "fr"), drawn_per_epoch=20)
        return prepared_batches(split, Batching(max_len=10, batch_size=8, sort_batches=1,
                                                seed=11))

    rows = []
    for (source, _), target_out in batches().take(20).as_numpy_iterator():
        for source_row, target_row in zip(source.tolist(), target_out.tolist()):
            source_row, target_row = ([x for x in row if x] for row in (source_row, target_row))
            assert source_row[-1] == target_row[-1] == EOS_ID
            rows.append((source_row[:-1], target_row[:-1]))
    assert len(rows) == 160  # two epochs of 80
    for epoch in (rows[:80], rows[80:]):
        drawn = [pair for pair in epoch if pair[0][0] == 6]
        assert len(drawn) == 20  # a quarter
        assert sorted(pair for pair in epoch if pair[0][0] == 4) == sorted(own)
        for pair in drawn:
            assert pair == others[pair[0][1] - 1000]
    assert len({pair[0][1] for pair in rows if pair[0][0] == 6}) == 40  # none twice yet

    first = iter(batches())
    for _ in range(7):
        next(first)
    saved = tf.train.Checkpoint(iterator=first).write(str(tmp_path / "ckpt" / "it"))
    expected = [next(first) for _ in range(5)]
    resumed = iter(batches())
    tf.train.Checkpoint(iterator=resumed).read(saved).assert_consumed()
    for want in expected:
        got = next(resumed)
        for a, b in zip(tf.nest.flatten(want), tf.nest.flatten(got)):
            assert np.array_equal(a.numpy(), b.numpy())


# ---------------------------------------------------------------- a child, end to end

@pytest.fixture(scope="module")
def child(cli_runner, tiny_run, tiny_corpus, new_corpus, tmp_path_factory):
    """A child of tiny_run on new_corpus: 3 updates with the embeddings and encoder
    frozen, the pull on, the parent's optimizer state kept, words seen once as <unk>
    (so that it builds an unknown-word dictionary, which its parent has none of), a
    quarter of each epoch drawn from the parent's pairs, and two more splits reported:
    the parent's test split and the child's own."""
    out = tmp_path_factory.mktemp("child") / "run"
    result = cli_runner("train", "--init-from", tiny_run, "--data", new_corpus, "--out", out,
                        "--max-steps", 3, "--freeze", "embeddings,encoder", "--keep-optimizer",
                        "--set", "parent_pull=0.5", "--set", "vocab_min_count=2",
                        "--mix", "0.25",
                        "--also-report", f"parent={tiny_corpus / 'test.en'},"
                                         f"{tiny_corpus / 'test.fr'}",
                        "--also-report", f"own={new_corpus / 'test.en'},{new_corpus / 'test.fr'}",
                        prog="train.py")
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


def test_a_child_keeps_the_parents_ids_and_adds_the_new_words(child, tiny_run):
    out, result = child
    for lang in ("en", "fr"):
        theirs = (tiny_run / f"vocab.{lang}.txt").read_text(encoding="utf-8").splitlines()
        ours = (out / f"vocab.{lang}.txt").read_text(encoding="utf-8").splitlines()
        assert ours[:len(theirs)] == theirs
        side = 0 if lang == "en" else 1
        assert {pair[side] for pair in NEW_WORDS} <= set(ours[len(theirs):])
        assert ONCE[side] not in ours  # seen once, under vocab_min_count=2
    info = json.loads((out / "data.json").read_text())
    record = info["parent"]
    assert record["run"] == str(tiny_run.resolve())
    assert record["source_words"] == len((tiny_run / "vocab.en.txt").read_text().splitlines())
    assert record["new_source_words"] >= len(NEW_WORDS)
    assert record["step"] == int(record["checkpoint"].rsplit("-", 1)[1])
    assert record["optimizer_checkpoint"].startswith(str((tiny_run / "checkpoints").resolve()))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parent"] == record and summary["updates"] == 3
    assert f"starting from {tiny_run.resolve()}" in result.stderr


def test_a_child_starts_with_its_parents_weights_and_keeps_the_frozen_ones(child):
    """At step 0 every weight is the parent's (the parent's rows exactly, new rows as
    <unk>'s); after training the frozen parts are bit for bit what they were, and the
    others moved."""
    from keras_nmt.runner.adaptation import part_of
    from keras_nmt.core.constants import UNK_ID

    out, _ = child
    record = json.loads((out / "data.json").read_text())["parent"]
    parent = model_at(record["run"], record["checkpoint"])
    start = model_at(out, out / "checkpoints" / "ckpt-0")
    end = model_at(out, out / "checkpoints" / "ckpt-3")
    source, target = record["source_words"], record["target_words"]
    shared = {"encoder/embedding/_embeddings": np.s_[:source],
              "decoder/embedding/_embeddings": np.s_[:target],
              "decoder/readout/output_kernel": np.s_[:, :target],
              "decoder/readout/output_bias": np.s_[:target]}
    for path, value in parent.items():
        assert np.array_equal(start[path][shared.get(path, ...)], value), path
    assert np.array_equal(start["encoder/embedding/_embeddings"][source:],
                          np.repeat(parent["encoder/embedding/_embeddings"][UNK_ID:UNK_ID + 1],
                                    record["new_source_words"], axis=0))
    unchanged = {path for path in start if np.array_equal(end[path], start[path])}
    frozen = {path for path in start if part_of(path) in ("embeddings", "encoder")}
    assert frozen <= unchanged and "encoder/embedding/_embeddings" in frozen
    # The alignment model's weights, under v_a of about 1e-10 after 10 updates, may move
    # by less than their last bit; every other trained weight moved.
    assert unchanged - frozen <= {path for path in start if part_of(path) == "attention"}


def test_a_child_keeps_its_parents_optimizer_state(child):
    """--keep-optimizer: the child's step-0 state of a shared weight is the parent's last
    checkpoint's, its new words' rows empty, and the update count continues."""
    import tensorflow as tf

    from keras_nmt.runner.adaptation import trained_variables
    from keras_nmt.rundir.model_weights import model_variables
    from keras_nmt.models.rnnsearch import TranslationModel
    from keras_nmt.rundir.run_directory import RunDir
    from keras_nmt.training.optimizers import make_optimizer, slot_variables

    out, _ = child
    record = json.loads((out / "data.json").read_text())["parent"]
    states = {}
    for run, checkpoint in ((record["run"], record["optimizer_checkpoint"]),
                            (out, str(out / "checkpoints" / "ckpt-0"))):
        config = RunDir(run).load_config()
        model = TranslationModel(config)
        optimizer = make_optimizer(config)
        optimizer.build(trained_variables(model, config))
        tf.train.Checkpoint(optimizer=optimizer).read(checkpoint).expect_partial()
        paths = model_variables(model)
        states[run] = (int(optimizer.iterations.numpy()), {
            path: [s.numpy() for s in slot_variables(optimizer, config.optimizer, paths[path])]
            for path in ("decoder/readout/output_kernel", "decoder/cell/recurrent_kernel")})
    (their_count, theirs), (our_count, ours) = states[record["run"]], states[out]
    assert our_count == their_count > 0
    assert all(len(slots) == 2 for slots in ours.values())  # tiny_run's Adadelta
    target = record["target_words"]
    for ours_slot, theirs_slot in zip(ours["decoder/readout/output_kernel"],
                                      theirs["decoder/readout/output_kernel"]):
        assert np.array_equal(ours_slot[:, :target], theirs_slot) and np.abs(theirs_slot).sum() > 0
        assert not ours_slot[:, target:].any()
    for ours_slot, theirs_slot in zip(ours["decoder/cell/recurrent_kernel"],
                                      theirs["decoder/cell/recurrent_kernel"]):
        assert np.array_equal(ours_slot, theirs_slot)


def test_a_childs_tables_are_rebuilt_from_its_own_data(child, tiny_run):
    """The child's lexical table comes from its own pairs, but for the parent's source
    words its data holds at most twice: those rows are the parent's, and their counts both
    trainings'."""
    import contextlib

    from keras_nmt.core.constants import UNK_ID
    from keras_nmt.lexicon.table import NOT_WORDS, RARE_COUNT
    from keras_nmt.rundir.run_directory import RunDir

    out, _ = child
    lexicon = RunDir(out).load_lexicon()  # checked against the child's vocabularies
    theirs = RunDir(tiny_run).load_lexicon()
    assert lexicon.info["corpus_lines"] == 120
    assert theirs.info["corpus_lines"] == 400
    size = len(lexicon.source_counts)
    with contextlib.closing(RunDir(out).prepared_split(needed_for="the test")) as split:
        own = split.token_counts(0, size)
    parents = np.zeros(size, np.int64)
    parents[:len(theirs.source_counts)] = theirs.source_counts
    taken = (own <= RARE_COUNT) & (parents > RARE_COUNT)
    taken[list(NOT_WORDS) + [UNK_ID]] = False
    assert lexicon.info["parent_rows"] == taken.sum() > 0
    assert f", {taken.sum():,} source words' rows from the parent)" in child[1].stderr
    shared = len(theirs.targets)  # the parent's words: the child's first ids
    assert not taken[shared:].any()
    assert np.array_equal(lexicon.targets[:shared][taken[:shared]],
                          theirs.targets[taken[:shared]])
    assert np.array_equal(lexicon.source_counts, own + np.where(taken, parents, 0))
    seen = ~taken[:shared] & (own[:shared] > RARE_COUNT)  # the child's own rows
    assert not np.array_equal(lexicon.targets[:shared][seen], theirs.targets[seen])
    # The parent keeps every word (no dictionary); the child's words seen once are <unk>.
    assert not (tiny_run / "dictionary.tsv").exists()
    entries = RunDir(out).load_dictionary()
    assert entries[ONCE[0]] == ONCE[1]


class TablesRun:
    """What the table builders read of a run: its parent, its tables, its target words."""

    def __init__(self, parent=None, lexicon=None, dictionary=None, target_words=()):
        self.parent, self.lexicon, self.dictionary = parent, lexicon, dictionary
        self.target_words = set(target_words)

    def parent_run(self):
        return self.parent

    def load_lexicon(self):
        if isinstance(self.lexicon, Exception):
            raise self.lexicon
        return self.lexicon

    def load_dictionary(self):
        if isinstance(self.dictionary, Exception):
            raise self.dictionary
        return self.dictionary

    def codecs(self):
        from types import SimpleNamespace

        return None, SimpleNamespace(vocabulary=self.target_words)


def test_a_childs_table_takes_its_parents_rows_for_the_words_its_data_barely_holds():
    from keras_nmt.core.errors import LexiconError
    from keras_nmt.lexicon.table import Lexicon, _with_parents_rows

    # Ids 0-3 are padding, <unk>, BOS and EOS; 4-6 the parent's words; 7 a new word.
    ours = Lexicon(np.full((8, 2), 9, np.int32), np.full((8, 2), 0.5, np.float32), {},
                   np.array([0, 9, 0, 0, 2, 0, 30, 1]))
    theirs = Lexicon(np.array([[0], [5], [0], [0], [4], [6], [5]], np.int32),
                     np.array([[0], [1], [0], [0], [0.75], [1], [1]], np.float32), {},
                     np.array([0, 50, 0, 0, 40, 2, 10]))
    merged, taken = _with_parents_rows(TablesRun(TablesRun(lexicon=theirs)), ours)
    assert taken == 1  # word 4: twice here, 40 times there; 5 is rare in both, 6 ours
    assert merged.targets.tolist() == [[9, 9]] * 4 + [[4, 0]] + [[9, 9]] * 3
    assert merged.probs[4].tolist() == [0.75, 0.0]
    assert merged.source_counts.tolist() == [0, 9, 0, 0, 42, 0, 30, 1]
    assert _with_parents_rows(TablesRun(), ours) == (ours, None)  # no parent
    gone = TablesRun(TablesRun(lexicon=LexiconError("P has no lexical table")))
    assert _with_parents_rows(gone, ours) == (ours, "none: P has no lexical table")


def test_a_childs_dictionary_keeps_its_parents_entries_that_still_hold():
    from keras_nmt.core.errors import DictionaryError
    from keras_nmt.lexicon.unk_dictionary import UnknownWordDictionary, _with_parents_entries

    parent = TablesRun(dictionary={"chat": "chatte", "zorblax": "zorblaxe", "tom": "thomas",
                                   "vieux": "old"})
    child = TablesRun(parent, target_words={"zorblaxe", "le"})  # it has learned "zorblaxe"
    own = UnknownWordDictionary({"tom": "tommy", "neuf": "new"}, {"entries": 2, "method": "m"})
    merged = _with_parents_entries(child, own)
    assert merged.entries == {"chat": "chatte", "vieux": "old", "tom": "tommy", "neuf": "new"}
    assert merged.info == {"entries": 4, "method": "m", "parent_entries": 2}
    assert _with_parents_entries(child, None).entries == {
        "chat": "chatte", "tom": "thomas", "vieux": "old"}
    assert _with_parents_entries(TablesRun(), own) is own
    unreadable = TablesRun(TablesRun(dictionary=DictionaryError("bad line")))
    assert _with_parents_entries(unreadable, own) is own
    assert _with_parents_entries(unreadable, None) is None


def test_a_child_mixes_a_quarter_of_its_parents_pairs_into_each_epoch(child, tiny_run):
    out, result = child
    info = json.loads((out / "data.json").read_text())
    kept = info["train"]["kept"]
    parent_kept = json.loads((tiny_run / "data.json").read_text())["train"]["kept"]
    drawn = round(kept * 0.25 / 0.75)
    assert info["mix"] == {"run": str(tiny_run.resolve()),
                           "prepared": str((tiny_run / "prepared").resolve()),
                           "fraction": 0.25, "pairs": parent_kept, "drawn_per_epoch": drawn,
                           "epoch_pairs": kept + drawn}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mix"] == info["mix"]
    # An epoch is the child's pairs and the drawn ones: 3 batches of 16 of it.
    assert summary["epochs"] == pytest.approx(3 * 16 / (kept + drawn))
    assert (f"each epoch of {kept + drawn:,} pairs draws {drawn:,} (25%) from the "
            f"{parent_kept:,} training pairs of {tiny_run.resolve()}") in result.stderr


def test_a_child_reports_its_parents_domain_beside_its_own(child, tiny_corpus, new_corpus):
    """--also-report: the parent's test split is translated and scored with the
    held-out one; the child's own test split, given again, scores as the held-out."""
    out, result = child
    summary = json.loads((out / "summary.json").read_text())
    parent, own, held_out = (summary["also_reported"]["parent"], summary["also_reported"]["own"],
                             summary["held_out"])
    assert parent["sentences"] == 40 and held_out["sentences"] == 20
    assert {key: own[key] for key in ("split", "sentences", "bleu", "bleu_longer_than_30")} == \
        {key: held_out[key] for key in ("split", "sentences", "bleu", "bleu_longer_than_30")}
    assert f"parent BLEU (test, 40 sentences): {parent['bleu']:.2f}" in result.stdout
    assert f"own BLEU (test, 20 sentences): {held_out['bleu']:.2f}" in result.stdout
    recorded = json.loads((out / "data.json").read_text())["also_report"]
    assert recorded["parent"] == {"source": str(tiny_corpus.resolve() / "test.en"),
                                  "target": str(tiny_corpus.resolve() / "test.fr")}
    assert set(recorded) == {"parent", "own"}


def test_a_child_translates_like_any_run(child, cli_runner):
    out, _ = child
    lines = "The zorblax sings.\nThe cat sees the dog.\n"
    result = cli_runner("translate", out, "--quiet", stdin=lines)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2


def test_serve_holds_the_parent_and_the_child_side_by_side(child, tiny_export, new_corpus,
                                                           cli_runner, tmp_path):
    """The child, resumed for one more update, its last two checkpoints averaged and
    scored, exported with those weights, vocabulary selection and int8 as "child" into the
    parent's export directory: its models.config lists both, and one server answers for
    each as its own ONNX translator does, the child with its new words known."""
    from keras_nmt.decoding.onnx_translator import OnnxTranslator
    from keras_nmt.serving.registry import Registry

    exports = tmp_path / "exports"
    shutil.copytree(tiny_export, exports)  # the parent, as "nmt"
    out = tmp_path / "child"
    shutil.copytree(child[0], out, ignore=shutil.ignore_patterns("tensorboard"))
    result = cli_runner("train", "--resume", "--out", out, "--max-steps", 4, "--no-lexicon",
                        "--quiet", prog="train.py")
    assert result.returncode == 0, result.stderr[-3000:]
    result = cli_runner("average", out, "--last", 2, "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    result = cli_runner("evaluate", out, "--weights", "averaged", "--src",
                        new_corpus / "test.en", "--ref", new_corpus / "test.fr", "--json",
                        "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    evaluated = json.loads(result.stdout)
    assert evaluated["sentences"] == 20 and 0 <= evaluated["runs"][0]["bleu"] <= 100
    result = cli_runner("export", out, "--weights", "averaged", "--name", "child", "--onnx",
                        "--shortlist", "5,2", "--int8", "--int8-max-drop", 5, "--out", exports,
                        "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    config = (exports / "models.config").read_text(encoding="utf-8")
    assert 'name: "nmt"' in config and 'name: "child"' in config
    lines = ["The zorblax sings.", "The cat sees the dog."]
    translators = {name: OnnxTranslator.from_export_dir(exports, name) for name in ("nmt", "child")}
    assert "zorblax" in translators["child"].source_vocab
    assert "zorblax" not in translators["nmt"].source_vocab
    with ServerThread(Registry.from_export_dir(exports)) as server:
        assert server.call("/health")[1]["models"] == {"nmt": [1], "child": [1]}
        for name, translator in translators.items():
            expected = [t.text for t in translator.translate(lines)]
            status, answer = server.call("/translate", {"text": lines, "model": name})
            assert status == 200, answer
            assert [t["text"] for t in answer["translations"]] == expected
            status, answer = server.call(f"/v1/models/{name}:predict", {"instances": lines})
            assert status == 200, answer
            assert len(answer["predictions"]) == len(lines)


# ---------------------------------------------------------------- resume and errors

def test_a_child_resumes_from_its_own_checkpoint_without_its_parent(run_train, tiny_run,
                                                                    new_corpus, tmp_path):
    """Stopped after 1 update, the child resumes at step 1 with its parent gone (its
    weights and the pull's anchors are its own checkpoint's), still frozen where it was;
    --init-from with --resume, or another --freeze, is refused."""
    parent = tmp_path / "parent"
    shutil.copytree(tiny_run, parent, ignore=shutil.ignore_patterns("tensorboard"))
    out = tmp_path / "child"
    first = run_train("--init-from", parent, "--data", new_corpus, "--out", out,
                      "--max-steps", 1, "--freeze", "output", "--set", "parent_pull=0.1",
                      "--no-lexicon", "--quiet")
    assert first.returncode == 0, first.stderr[-3000:]
    step_1 = model_at(out, out / "checkpoints" / "ckpt-1")
    # Without --keep-optimizer the optimizer starts fresh: no state read from the parent.
    assert json.loads((out / "data.json").read_text())["parent"]["optimizer_checkpoint"] is None
    assert optimizer_updates(out / "checkpoints" / "ckpt-0") == 0
    assert optimizer_updates(out / "checkpoints" / "ckpt-1") == 1
    assert optimizer_updates(parent / "checkpoints" / "ckpt-10") == 10
    shutil.rmtree(parent)
    assert_refused(run_train("--init-from", tiny_run, "--resume", "--out", out),
                   "--init-from starts a new run from another's weights: not with --resume")
    assert_refused(run_train("--resume", "--out", out, "--freeze", "encoder"),
                   "--set freeze=encoder does not match the run")
    second = run_train("--resume", "--out", out, "--max-steps", 2, "--no-lexicon")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed at step 1" in second.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == 2 and summary["parent"]["run"] == str(parent.resolve())
    end = model_at(out, out / "checkpoints" / "ckpt-2")
    for path in ("decoder/readout/output_kernel", "decoder/readout/output_bias"):
        assert np.array_equal(end[path], step_1[path]), path
    assert not np.array_equal(end["decoder/cell/input_kernel"], step_1["decoder/cell/input_kernel"])


def test_a_mixing_child_resumes_after_a_kill(run_train, tiny_run, tiny_corpus, new_corpus,
                                            tmp_path):
    """Killed after its third update (SIGKILL, a process of its own), a child with --mix
    resumes from step 2 with the same mix and the splits it reports; without the
    parent's prepared ids the resume is refused in one line."""
    from keras_nmt.core.faults import HOOK_ENV

    parent = tmp_path / "parent"
    shutil.copytree(tiny_run, parent, ignore=shutil.ignore_patterns("tensorboard"))
    out = tmp_path / "child"
    code, output = run_logged(
        [sys.executable, ROOT / "train.py", "--init-from", parent, "--data", new_corpus,
         "--out", out, "--mix", f"{parent}:0.5", "--max-steps", 4, "--no-lexicon",
         "--set", "checkpoint_every=2",
         "--also-report", f"parent={tiny_corpus / 'valid.en'},{tiny_corpus / 'valid.fr'}"],
        tmp_path / "killed.log", child_env(**{HOOK_ENV: "step@3"}), timeout=300)
    assert code == -signal.SIGKILL, output[-3000:]
    (parent / "prepared").rename(parent / "moved")
    assert_refused(run_train("--resume", "--out", out, "--max-steps", 4),
                   "the training ids that --mix draws from are gone",
                   "needed for --resume", f"put {parent.resolve()} back")
    (parent / "moved").rename(parent / "prepared")
    resumed = run_train("--resume", "--out", out, "--max-steps", 4, "--no-lexicon")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed at step 2" in resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    kept = summary["data"]["train"]["kept"]
    assert summary["updates"] == 4 and summary["mix"]["fraction"] == 0.5
    assert summary["mix"]["drawn_per_epoch"] == kept
    assert summary["also_reported"]["parent"]["sentences"] == 30  # recorded, reported again


@pytest.fixture
def unreadable_parent(tiny_run, tmp_path):
    """A copy of tiny_run whose best weights' data is cut short."""
    copy = tmp_path / "broken"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tensorboard"))
    for data in (copy / "best").glob("ckpt-*.data-*"):
        data.write_bytes(data.read_bytes()[:10])
    return copy


def test_a_parent_must_be_a_run_with_readable_weights(run_train, tiny_run, new_corpus, tmp_path,
                                                      unreadable_parent):
    out = tmp_path / "child"

    def child_of(parent, *args):
        return run_train("--init-from", parent, "--data", new_corpus, "--out", out, *args)

    assert_refused(child_of(tmp_path / "nowhere"), "--init-from: run directory not found")
    (tmp_path / "empty").mkdir()
    assert_refused(child_of(tmp_path / "empty"), "--init-from: ", "is not a run directory")
    no_weights = tmp_path / "no-weights"
    shutil.copytree(tiny_run, no_weights,
                    ignore=shutil.ignore_patterns("tensorboard", "checkpoints", "best"))
    assert_refused(child_of(no_weights), "--init-from: ", "holds no trained weights")
    assert_refused(child_of(unreadable_parent, "--weights", "best"),
                   "--init-from: the weights ", "are unreadable")
    assert not out.exists()


@pytest.mark.parametrize("args, expected", [
    (["--tokenizer", "sentencepiece"], "the parent {parent} was trained with --tokenizer word, "
                                       "not --tokenizer sentencepiece"),
    (["--src-lang", "de"], "was trained with --src-lang en, not --src-lang de"),
    (["--set", "hidden=32"], "--init-from: --set hidden=32 changes the shape of the parent's "
                             "weights (hidden is 16 in {parent})"),
    (["--variant", "encdec30"], "--variant encdec30 is an RNNencdec"),
    (["--size", "compact"], "the model's size is the parent's"),
    (["--set", "src_vocab_size=20"], "cannot hold the parent's"),
    (["--keep-optimizer", "--set", "optimizer=adam"], "--keep-optimizer: the parent"),
    (["--freeze", "wings"], "freeze: no part named 'wings'"),
    (["--mix", "1.5"], "--mix 1.5: FRACTION must be a number between 0 and 1"),
    (["--mix", "0.2", "--set", "max_len=20"], "--mix: the training pairs of {parent} are up to "
                                              "30 tokens long, the child's up to 20"),
    (["--also-report", "news=nowhere.en,nowhere.fr"], "--also-report news: "),
])
def test_what_a_parent_cannot_hold_is_refused_in_one_line(run_train, tiny_run, new_corpus,
                                                          tmp_path, args, expected):
    out = tmp_path / "child"
    result = run_train("--init-from", tiny_run, "--data", new_corpus, "--out", out, *args)
    assert_refused(result, expected.format(parent=tiny_run))
    assert not out.exists()


@pytest.mark.parametrize("args, expected", [
    (["--init-from", "RUN", "--resume", "--out", "X"], "--init-from starts a new run"),
    (["--keep-optimizer"], "--keep-optimizer needs --init-from PARENT_RUN"),
    (["--weights", "best"], "--weights needs --init-from PARENT_RUN"),
    (["--freeze", "encoder"], "--freeze holds a run to the weights it starts from: it needs "
                              "--init-from"),
    (["--set", "parent_pull=1"], "--set parent_pull holds a run to the weights"),
    (["--mix", "0.2"], "--mix needs --init-from PARENT_RUN"),
])
def test_the_options_of_init_from_need_it(run_train, tiny_corpus, tmp_path, args, expected):
    out = tmp_path / "run"
    result = run_train("--data", tiny_corpus, "--out", out, *tiny_args(), *args)
    assert_refused(result, expected)
    assert not out.exists()


def test_mix_draws_only_from_a_run_whose_ids_are_the_childs(run_train, tiny_run, tiny_spm_run,
                                                             new_corpus, tmp_path):
    out = tmp_path / "child"

    def child_mixing(source):
        return run_train("--init-from", tiny_run, "--data", new_corpus, "--out", out,
                         "--mix", f"{source}:0.2")

    assert_refused(child_mixing(new_corpus), f"--mix: {new_corpus} is not a run directory",
                   "PARENT_DATA is a run directory, whose prepared training ids are read")
    assert_refused(child_mixing(tiny_spm_run), f"--mix: {tiny_spm_run} is a en-fr "
                   "sentencepiece run, the parent a en-fr word one")
    other = tmp_path / "other"
    shutil.copytree(tiny_run, other, ignore=shutil.ignore_patterns("tensorboard"))
    words = (other / "vocab.fr.txt").read_text(encoding="utf-8").splitlines()
    words[5], words[6] = words[6], words[5]  # the same words, two ids swapped
    (other / "vocab.fr.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    assert_refused(child_mixing(other), f"the target vocabulary of {other} is not the "
                   "beginning of the parent's")
    assert not out.exists()


def test_a_sentencepiece_child_keeps_its_parents_model(run_train, tiny_spm_run, new_corpus,
                                                       tmp_path):
    """The new data is cut into the parent's pieces: the same models and vocabularies,
    no new rows."""
    out = tmp_path / "child"
    result = run_train("--init-from", tiny_spm_run, "--data", new_corpus, "--out", out,
                       "--max-steps", 1, "--no-lexicon", "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    for lang in ("en", "fr"):
        assert (out / f"spm.{lang}.model").read_bytes() == \
            (tiny_spm_run / f"spm.{lang}.model").read_bytes()
        assert (out / f"vocab.{lang}.txt").read_text() == \
            (tiny_spm_run / f"vocab.{lang}.txt").read_text()
    record = json.loads((out / "data.json").read_text())["parent"]
    assert record["new_source_words"] == record["new_target_words"] == 0
    assert json.loads((out / "data.json").read_text())["tokenizer"] == "sentencepiece"
