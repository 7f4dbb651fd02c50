"""``keras-nmt train`` (and ``python train.py``): arguments in, one clear line out on any bad input."""

from __future__ import annotations

import argparse

from keras_nmt.core import cpu, distribute
from keras_nmt.cli.common import (
    Console, OneLineParser, add_quiet_argument, positive_float, positive_int, quiet_tensorflow,
    run_main,
)
from keras_nmt.core.config import (
    DEFAULT_VARIANT, FREEZABLE, PRECISIONS, PRESETS, RECIPES, SIZES, VARIANTS, budget_recipe_summary,
    parse_overrides, variant_config,
)
from keras_nmt.core.errors import RunDirError, StrategyError
from keras_nmt.rundir.run_directory import WEIGHTS
from keras_nmt.text.sentencepiece import MODEL_TYPES
from keras_nmt.runner.train_options import TrainOptions, parse_also_report, parse_mix

PROG = "keras-nmt train"




def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Train RNNsearch / RNNencdec (Bahdanau et al., 2015).",
        epilog="variants: " + ", ".join(
            f"{name} ({v['architecture']}, sentences up to {v['max_len']} tokens)"
            for name, v in VARIANTS.items()
        ),
    )
    parser.add_argument(
        "--variant", help=f"one of: {', '.join(VARIANTS)} (default {DEFAULT_VARIANT})",
    )
    parser.add_argument(
        "--data",
        help="'builtin' (generated corpus, the default), 'wmt14-en-fr' (the paper's corpus, "
        "downloaded into the cache) or a directory with train.SRC/train.TGT and "
        "valid.SRC/valid.TGT (test.* optional)",
    )
    parser.add_argument(
        "--cache-dir", help="with --data wmt14-en-fr: where downloads and the prepared corpus are "
        "kept (default $KERAS_NMT_CACHE or ~/.cache/keras-nmt)",
    )
    parser.add_argument(
        "--mirror", help="with --data wmt14-en-fr: base URL to fetch every file from "
        "(default $KERAS_NMT_WMT14_MIRROR or the statmt.org addresses)",
    )
    parser.add_argument(
        "--max-train-pairs", type=positive_int,
        help="with --data wmt14-en-fr: a deterministic random sample of this many training pairs",
    )
    parser.add_argument("--src-lang", dest="src", metavar="LANG",
                        help="source language, the suffix of the corpus files (default en)")
    parser.add_argument("--tgt-lang", dest="tgt", metavar="LANG",
                        help="target language, the suffix of the corpus files (default fr)")
    parser.add_argument(
        "--tokenizer", choices=("word", "sentencepiece"),
        help="'word' (the paper's Moses-compatible words and shortlists, the default) or "
        "'sentencepiece' (a SentencePiece model per language trained on the training side, "
        "src/tgt_vocab_size pieces, kept in the run directory)",
    )
    parser.add_argument(
        "--joint-vocabulary", action="store_true",
        help="with --tokenizer sentencepiece: one SentencePiece model trained on both sides "
        "(src_vocab_size = tgt_vocab_size pieces), so that names and numbers are cut alike in "
        "both languages",
    )
    parser.add_argument(
        "--sentencepiece-type", choices=MODEL_TYPES,
        help="with --tokenizer sentencepiece: the SentencePiece model, 'unigram' (default) or "
        "'bpe'",
    )
    parser.add_argument(
        "--subword-samples", type=positive_int, metavar="K",
        help="with --tokenizer sentencepiece: subword regularisation; K copies of the "
        "training split in segmentations sampled from the SentencePiece models, made once "
        "when the run is set up; epoch E trains on copy E mod K",
    )
    parser.add_argument(
        "--subword-alpha", type=positive_float, metavar="A",
        help="with --subword-samples: a segmentation is drawn with probability proportional "
        "to its probability to the power A, among its 32 best (default 0.1; smaller spreads "
        "the draws)",
    )
    parser.add_argument("--out", help="run directory (default runs/VARIANT-TIMESTAMP)")
    parser.add_argument("--max-steps", type=positive_int, help="stop after this many updates")
    parser.add_argument(
        "--max-minutes", type=positive_float, help="stop after this much training time in total"
    )
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a configuration field, e.g. --set hidden=256 (repeatable)",
    )
    parser.add_argument(
        "--resume", action="store_true",
        help="continue the run in --out; the options that define the run take the run's "
        "values, and any of them given must match it",
    )
    parser.add_argument("--seed", type=int, help="random seed (default: the config's)")
    parser.add_argument(
        "--init-from", metavar="PARENT_RUN",
        help="start a new run from the weights of the run PARENT_RUN, on --data: its "
        "architecture, languages and tokenizer; its word vocabularies extended with the new "
        "data's words (a parent's word keeps its id and learned rows), or its SentencePiece "
        "models kept; --set and --recipe change how the child trains (it takes no warm-up "
        "unless they give one)",
    )
    parser.add_argument(
        "--weights", choices=WEIGHTS, default=None,
        help="with --init-from: which of the parent's weights to start from: 'reported' (the "
        "default: those its report used), 'best', 'last' or 'averaged'",
    )
    parser.add_argument(
        "--keep-optimizer", action="store_true",
        help="with --init-from: start from the optimizer state of the parent's last "
        "checkpoint (its moments and update count) instead of a fresh optimizer",
    )
    parser.add_argument(
        "--freeze", metavar="PARTS",
        help="with --init-from: a comma list of the parts training leaves exactly as the "
        f"parent's: {', '.join(FREEZABLE)} (the same as --set freeze=PARTS)",
    )
    parser.add_argument(
        "--mix", metavar="[PARENT_DATA:]FRACTION",
        help="with --init-from: draw the share FRACTION (0 < F < 1) of each epoch's training "
        "pairs from the training pairs of PARENT_DATA, a run directory whose token ids it "
        "reads as they are (prepared/): the parent run (the default) or one whose "
        "vocabularies the parent's begin with; a corpus directory is refused. Each epoch "
        "draws the next pairs of a permutation of them, so only the pairs drawn are read",
    )
    parser.add_argument(
        "--also-report", metavar="NAME=SRC,REF", action="append", default=None,
        help="at the end, score this development split too (the source file SRC and its "
        "reference translations REF) and report its BLEU as NAME beside the held-out "
        "split's, e.g. the parent's domain beside the child's (repeatable; recorded, so "
        "--resume reports it again unless given others)",
    )
    parser.add_argument(
        "--size", choices=tuple(SIZES),
        help="the model size: 'paper' (m=620, n=n'=1000, l=500, Adadelta, batch 80; the "
        "default on your own corpus, days on a CPU), 'medium' (256/256/256/128, Adam 2e-3, "
        "batch 64: the published real-corpus results) or 'compact' (96/128/128/64, Adam 5e-3; "
        "the default on the built-in corpus)",
    )
    parser.add_argument(
        "--preset", choices=tuple(PRESETS),
        help="a size and a recipe together: 'budget' = --size medium --recipe budget, the "
        "settings of the published Anki and Multi30k results (give --max-minutes)",
    )
    parser.add_argument(
        "--paper-size", action="store_true",
        help="the same as --size paper, on the built-in corpus",
    )
    add_quiet_argument(parser, "print nothing but errors")
    parser.add_argument(
        "--strategy", choices=distribute.STRATEGIES, default="default",
        help="'default': one device; 'mirrored': every local GPU (or logical CPU); "
        "'multiworker': the machines listed in TF_CONFIG (run the same command on each)",
    )
    parser.add_argument(
        "--precision", choices=(*PRECISIONS, cpu.AUTO),
        help="computation dtype (default float32; fixed for a run, kept by --resume); "
        "'auto': mixed_bfloat16 where the CPU has AVX512_BF16 or AMX-BF16 and no GPU "
        "computes, float32 otherwise (summary.json records the choice and why)",
    )
    parser.add_argument(
        "--recipe", choices=tuple(RECIPES),
        help="how to train, after --size and before --set (which wins): 'budget' = "
        + budget_recipe_summary() + "; 'builtin' = the same warm-up, decay, averaging and weights, the "
        "default on the built-in corpus at its compact size; 'paper' = the paper's training "
        "(Adadelta, batch 80, a constant rate, N(0, 0.01^2) weights)",
    )
    parser.add_argument(
        "--no-lexicon", action="store_true",
        help="do not build the lexical table for vocabulary selection at the end (about a "
        "minute on a 160,000-pair corpus; keras-nmt lexicon RUN_DIR builds it later)",
    )
    jit = parser.add_mutually_exclusive_group()
    jit.add_argument(
        "--jit", action="store_true", default=None,
        help="compile the training step and the beam search with XLA (--strategy default "
        "only); batches are padded to widths that are multiples of 8 (--set length_multiple) "
        "so that XLA compiles once per width. The default where TensorFlow sees a GPU (4.6x "
        "there); slower than without on a CPU",
    )
    jit.add_argument("--no-jit", dest="jit", action="store_false", default=None,
                     help="do not compile with XLA, also on a GPU")
    parser.rename("--src", "--src-lang")
    parser.rename("--tgt", "--tgt-lang")
    parser.add_check(_check_init_from)
    return parser


def _check_init_from(args: argparse.Namespace) -> None:
    """The options of --init-from: only with it, and never with --resume."""
    if args.init_from and args.resume:
        raise ValueError("--init-from starts a new run from another's weights: not with "
                         "--resume, which continues a run from its own")
    for flag, given in (("--weights", args.weights is not None),
                        ("--keep-optimizer", args.keep_optimizer),
                        ("--mix", args.mix is not None)):
        if given and not args.init_from:
            raise ValueError(f"{flag} needs --init-from PARENT_RUN")




def main(argv: list[str] | None = None, stdin=None, stdout=None, stderr=None,
         prog: str = PROG) -> int:
    return run_main(build_parser(prog), _train, argv, stdin, stdout, stderr,
                    interrupted="interrupted; continue with --resume --out RUN_DIR")


def _train(args, console: Console) -> int:
    # Training writes its progress to sys.stderr itself (keras_nmt.core.progress), not to console.
    overrides = parse_overrides(args.overrides)
    if args.freeze is not None:
        overrides["freeze"] = args.freeze
    distribute.check(args.strategy)
    if args.jit and args.strategy != "default":
        raise StrategyError("--jit works with --strategy default only")
    # An unknown variant or a bad value fails here, before any work.
    recipe = args.recipe or (PRESETS[args.preset]["recipe"] if args.preset else None)
    variant_config(args.variant or DEFAULT_VARIANT, {**(RECIPES[recipe] if recipe else {}), **overrides})
    if args.resume and not args.out:
        raise RunDirError("--resume needs --out RUN_DIR (the run to continue)")
    mix_from, mix_fraction = parse_mix(args.mix) if args.mix is not None else (None, None)
    also_report = None if args.also_report is None else parse_also_report(args.also_report)
    quiet_tensorflow()
    from keras_nmt.runner import experiment  # TensorFlow loads here, after the cheap checks

    options = TrainOptions(
        variant=args.variant, data=args.data, src=args.src, tgt=args.tgt, out=args.out,
        max_steps=args.max_steps, max_minutes=args.max_minutes, overrides=overrides,
        resume=args.resume, seed=args.seed, paper_size=args.paper_size, quiet=args.quiet,
        cache_dir=args.cache_dir, mirror=args.mirror, max_train_pairs=args.max_train_pairs,
        tokenizer=args.tokenizer, joint_vocabulary=args.joint_vocabulary,
        subword_samples=args.subword_samples, subword_alpha=args.subword_alpha,
        sentencepiece_type=args.sentencepiece_type,
        strategy=args.strategy, jit=args.jit, precision=args.precision, recipe=args.recipe,
        lexicon=not args.no_lexicon,
        size=args.size, preset=args.preset, init_from=args.init_from,
        init_weights=args.weights or "reported", keep_optimizer=args.keep_optimizer,
        mix_from=mix_from, mix_fraction=mix_fraction, also_report=also_report,
    )
    experiment.train(options)
    return 0
