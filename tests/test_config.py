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


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu sse2
"""


def test_cpu_flags_are_read_from_the_first_processor(tmp_path):
    from keras_nmt.core.cpu import cpu_flags

    (tmp_path / "cpuinfo").write_text(CPUINFO)
    assert cpu_flags(str(tmp_path / "cpuinfo")) == {
        "fpu", "sse2", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    (tmp_path / "no-flags").write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n")
    assert cpu_flags(str(tmp_path / "no-flags")) == frozenset()
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()  # not Linux


@pytest.mark.parametrize("flags, found", [
    ({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, "amx_bf16"),
    ({"avx512f", "avx512_bf16"}, "avx512_bf16"),  # an AMD EPYC of Zen 4
    ({"avx512_bf16", "amx_bf16"}, "avx512_bf16"),  # AMX-BF16 without its tiles computes nothing
    ({"avx512f", "avx2", "amx_int8", "amx_tile"}, None),
    (set(), None),
])
def test_bfloat16_support_names_the_instruction(flags, found):
    from keras_nmt.core.cpu import bfloat16_support

    assert bfloat16_support(flags) == found


@pytest.mark.parametrize("requested, flags, on_gpu, chosen", [
    ("auto", {"avx512_bf16"}, False, ("mixed_bfloat16", "auto: avx512_bf16 found")),
    ("auto", {"amx_bf16", "amx_tile", "avx512_bf16"}, False, ("mixed_bfloat16", "auto: amx_bf16 found")),
    ("auto", {"avx2", "avx512f"}, False, ("float32", "auto: no avx512_bf16 or amx_bf16 found")),
    ("auto", {"avx512_bf16"}, True, ("float32", "auto: a GPU computes, float32")),
    # A named precision wins, whatever the machine.
    ("float32", {"avx512_bf16"}, False, ("float32", "--precision float32")),
    ("mixed_bfloat16", set(), False, ("mixed_bfloat16", "--precision mixed_bfloat16")),
    ("mixed_float16", set(), True, ("mixed_float16", "--precision mixed_float16")),
])
def test_choose_precision(requested, flags, on_gpu, chosen):
    from keras_nmt.core.cpu import choose_precision

    assert choose_precision(requested, flags, on_gpu) == chosen


def test_precision_auto_resolves_into_the_new_run_s_config():
    from keras_nmt.runner.train_options import TrainOptions, new_run_config, resolve_precision

    def resolved(flags, on_gpu=False, **given):
        options, reason = resolve_precision(TrainOptions(**given), flags, on_gpu)
        return new_run_config(options.for_new_run()).precision, reason

    assert resolved({"avx512_bf16"}, precision="auto") == ("mixed_bfloat16", "auto: avx512_bf16 found")
    assert resolved({"sse2"}, precision="auto") == ("float32", "auto: no avx512_bf16 or amx_bf16 found")
    assert resolved({"avx512_bf16"}, on_gpu=True, precision="auto")[0] == "float32"
    # The default stays float32 on any machine; --precision wins over --set.
    assert resolved({"avx512_bf16"}) == ("float32", "the default")
    assert resolved({"avx512_bf16"}, overrides={"precision": "mixed_float16"}) == (
        "mixed_float16", "--set precision=mixed_float16")
    assert resolved(set(), precision="mixed_bfloat16", overrides={"precision": "float32"}) == (
        "mixed_bfloat16", "--precision mixed_bfloat16")
    # --resume: auto keeps the run's own precision (nothing to compare against it).
    options, reason = resolve_precision(TrainOptions(resume=True, precision="auto"),
                                        {"avx512_bf16"}, False)
    assert "precision" not in options.overrides and reason == "auto: --resume keeps the run's own"
