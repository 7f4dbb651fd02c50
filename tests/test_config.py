import pytest

from keras_nmt.core import config as config_lib
from keras_nmt.core.config import COMPACT, VARIANTS, Config, parse_overrides, variant_config
from keras_nmt.core.errors import ConfigError


def test_variants_are_the_papers_four():
    assert set(VARIANTS) == {"encdec30", "encdec50", "search30", "search50"}
    search50 = variant_config("search50")
    assert (search50.embedding, search50.hidden, search50.attention, search50.maxout) == (620, 1000, 1000, 500)
    assert (search50.src_vocab_size, search50.tgt_vocab_size, search50.batch_size) == (30000, 30000, 80)
    assert (search50.optimizer, search50.rho, search50.epsilon, search50.clipnorm) == ("adadelta", 0.95, 1e-6, 1.0)
    assert not search50.reset_after
    assert variant_config("encdec30").architecture == "encdec"
    assert variant_config("encdec30").max_len == 30
    assert variant_config("search30").uses_attention


def test_overrides_are_typed():
    overrides = parse_overrides(["hidden=256", "learning_rate=0.5", "reset_after=true", "optimizer=adam"])
    assert overrides == {"hidden": 256, "learning_rate": 0.5, "reset_after": True, "optimizer": "adam"}
    config = variant_config("search30", overrides)
    assert config.hidden == 256 and config.max_len == 30


@pytest.mark.parametrize("item, message", [
    ("nosuch=1", "unknown --set key 'nosuch'"),
    ("hidden=abc", "expected a value of type int"),
    ("reset_after=maybe", "expected a value of type bool"),
    ("hidden", "expects key=value"),
])
def test_bad_overrides_have_clear_messages(item, message):
    with pytest.raises(ConfigError, match=message):
        parse_overrides([item])


def test_bad_values_are_rejected():
    with pytest.raises(ConfigError, match="unknown variant"):
        variant_config("search70")
    with pytest.raises(ConfigError, match="hidden must be a positive integer"):
        variant_config("search50", {"hidden": 0})
    with pytest.raises(ConfigError, match="optimizer"):
        variant_config("search50", {"optimizer": "lion"})
    with pytest.raises(ConfigError, match="init must be one of paper, uniform, got 'xavier'"):
        variant_config("search50", parse_overrides(["init=xavier"]))
    assert variant_config("search50").init == "paper"  # the paper's variants keep B.1


def test_round_trip_and_compact_fields_exist():
    config = variant_config("encdec50", {"hidden": 32})
    assert Config.from_dict(config.to_dict()) == config
    assert set(COMPACT) <= set(config.to_dict())


def test_the_budget_recipe_comes_before_set():
    from keras_nmt.runner.train_options import TrainOptions, resolve_config

    config = resolve_config(TrainOptions(variant="search50", data="somewhere", recipe="budget",
                                         overrides={"dropout": 0.3}))
    assert (config.optimizer, config.lr_schedule, config.sampled_softmax) == ("adam", "budget", 4096)
    assert config.average_checkpoints == 3 and config.dropout == 0.3  # --set wins
    assert config.init == "uniform" and config.learning_rate == 2e-3
    paper = resolve_config(TrainOptions(variant="search50", data="somewhere"))
    assert (paper.optimizer, paper.lr_schedule, paper.dropout, paper.sampled_softmax, paper.init) == (
        "adadelta", "constant", 0.0, 0, "paper")


def test_the_recipe_help_reads_the_recipe(monkeypatch):
    from keras_nmt.cli.train import build_parser
    from keras_nmt.core.config import RECIPES

    def recipe_help() -> str:
        return next(action.help for action in build_parser()._actions if "--recipe" in action.option_strings)

    assert "Adam 0.002 at batch 64 with 200 warm-up steps" in recipe_help()
    assert "dropout 0.1, label smoothing 0.1, sampled softmax over 4,096 words" in recipe_help()
    assert "last 3 checkpoints" in recipe_help() and "fewer than 3 times read as <unk>" in recipe_help()
    monkeypatch.setitem(RECIPES, "budget", {**RECIPES["budget"], "dropout": 0.25, "learning_rate": 5e-3})
    assert "Adam 0.005 at batch 64" in recipe_help() and "dropout 0.25," in recipe_help()


def test_optimizer_fields_only_where_the_optimizer_reads_them():
    from keras_nmt.core.config import OPTIMIZER_FIELDS, check_optimizer_fields

    adam = variant_config("search50", {"optimizer": "adam"})
    with pytest.raises(ConfigError, match=r"^--set epsilon: only the adadelta optimizer reads "
                                          r"it, and this run uses adam"):
        check_optimizer_fields(adam, ["epsilon", "hidden"])
    check_optimizer_fields(adam, ["learning_rate", "clipnorm", "hidden"])  # every optimizer's
    check_optimizer_fields(variant_config("search50"), ["rho", "epsilon"])  # Adadelta's own
    check_optimizer_fields(adam, [])  # defaults never count


def test_recipes_set_only_what_their_optimizer_reads():
    """Recipe values are not checked at run time (a user who picks another optimizer
    cannot take them back), so each recipe must be consistent on its own, and with the
    built-in corpus's compact settings under it."""
    from keras_nmt.core.config import RECIPES, check_optimizer_fields

    for values in (COMPACT, *RECIPES.values(), *({**COMPACT, **r} for r in RECIPES.values())):
        check_optimizer_fields(variant_config("search50", values), values)


def test_sizes_presets_and_their_defaults():
    from keras_nmt.core.config import MEDIUM, RECIPES
    from keras_nmt.runner.train_options import TrainOptions, resolve_config

    def dims(config):
        return (config.embedding, config.hidden, config.attention, config.maxout,
                config.optimizer, config.batch_size)

    # A real corpus: the paper's size unless told; the built-in corpus: the compact one.
    assert dims(resolve_config(TrainOptions(data="corpus"))) == (620, 1000, 1000, 500, "adadelta", 80)
    assert dims(resolve_config(TrainOptions())) == (96, 128, 128, 64, "adam", 64)
    assert dims(resolve_config(TrainOptions(paper_size=True))) == (620, 1000, 1000, 500, "adadelta", 80)
    assert dims(resolve_config(TrainOptions(size="paper"))) == (620, 1000, 1000, 500, "adadelta", 80)
    medium = resolve_config(TrainOptions(data="corpus", size="medium"))
    assert dims(medium) == (256, 256, 256, 128, "adam", 64) and medium.learning_rate == 2e-3
    # The preset: the medium size and the budget recipe, exactly the published settings.
    budget = resolve_config(TrainOptions(data="corpus", preset="budget"))
    assert budget == resolve_config(TrainOptions(data="corpus", size="medium", recipe="budget"))
    assert {k: getattr(budget, k) for k in {**MEDIUM, **RECIPES["budget"]}} == {
        **MEDIUM, **RECIPES["budget"]}
    # Label smoothing is the preset's (two runs a corpus, benchmarks.md); the paper's
    # training takes it away again.
    assert budget.label_smoothing == 0.1 and budget.vocab_min_count == 3
    assert budget.dropout == 0.1  # two runs a corpus, experiments.md "Less dropout"
    # RNNencdec cannot fill an <unk> (no attention): the recipe keeps its words whole.
    assert resolve_config(TrainOptions(variant="encdec50", data="corpus",
                                       preset="budget")).vocab_min_count == 1
    paper = resolve_config(TrainOptions(data="corpus", size="medium", recipe="paper"))
    assert paper.label_smoothing == 0 and paper.vocab_min_count == 1
    # --set still wins, and contradictions are refused.
    assert resolve_config(TrainOptions(preset="budget", overrides={"hidden": 32})).hidden == 32
    with pytest.raises(ConfigError, match="--preset budget is --size medium --recipe budget: "
                                          "it contradicts --size paper"):
        resolve_config(TrainOptions(preset="budget", size="paper"))
    from keras_nmt.runner.train_options import new_run_config

    with pytest.raises(ConfigError, match="--paper-size is --size paper: it contradicts --size compact"):
        new_run_config(TrainOptions(paper_size=True, size="compact").for_new_run())


def test_the_builtin_corpus_trains_with_its_recipe_and_the_papers_is_one_flag_away():
    from keras_nmt.core.config import Config
    from keras_nmt.runner.train_options import TrainOptions, resolve_config

    def training(config):
        return (config.optimizer, config.learning_rate, config.batch_size, config.lr_schedule,
                config.warmup_steps, config.init, config.average_checkpoints, config.dropout,
                config.sampled_softmax)

    papers = training(Config())
    assert papers == ("adadelta", 1.0, 80, "constant", 0, "paper", 0, 0.0, 0)
    # The built-in corpus at its compact size: Adam with a warm-up and a decay over the
    # budget, uniform weights, the average of the last 3 checkpoints.
    assert training(resolve_config(TrainOptions())) == (
        "adam", 5e-3, 64, "budget", 200, "uniform", 3, 0.0, 0)
    assert resolve_config(TrainOptions(size="compact")).lr_schedule == "budget"
    # --recipe paper: Appendix B's training at the compact dimensions.
    paper = resolve_config(TrainOptions(recipe="paper"))
    assert training(paper) == papers and paper.hidden == 128
    # Anywhere else no recipe unless asked: the paper's size and training.
    assert training(resolve_config(TrainOptions(paper_size=True))) == papers
    assert training(resolve_config(TrainOptions(data="corpus"))) == papers
    assert training(resolve_config(TrainOptions(data="corpus", size="compact")))[3:] == papers[3:]
    # --set still wins over the default recipe.
    assert resolve_config(TrainOptions(overrides={"average_checkpoints": 0})).average_checkpoints == 0


def test_max_len_must_fit_the_prepared_splits_16_bit_lengths(cli_runner, tmp_path):
    """A longer max_len would wrap a length in prepared/ and misalign every later pair."""
    import numpy as np

    from keras_nmt.data import prepared

    assert config_lib.MAX_LEN_LIMIT == prepared.MAX_LENGTH == np.iinfo(np.uint16).max
    assert variant_config("search50", {"max_len": 65_535}).max_len == 65_535
    with pytest.raises(ConfigError, match="max_len must be at most 65,535 .* got 65,536"):
        variant_config("search50", {"max_len": 65_536})
    ran = cli_runner("train", "--variant", "search30", "--data", tmp_path / "nowhere",
                     "--out", tmp_path / "run", "--set", "max_len=70000")
    assert ran.returncode == 2 and ran.stderr.splitlines() == [
        "keras-nmt train: error: max_len must be at most 65,535 (the prepared split's 16-bit "
        "lengths), got 70,000"], ran.stderr
    assert not (tmp_path / "run").exists()


def test_patience_counts_evaluations_and_is_at_least_one():
    assert variant_config("search50", {"patience": 1}).patience == 1
    with pytest.raises(ConfigError, match="patience must be a positive integer, got 0"):
        variant_config("search50", {"patience": 0})
