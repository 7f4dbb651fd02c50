"""One vocabulary of options: docs/cli.md's table is the parsers', every spelling shared by
two commands has one rule there and one kind (on/off or taking a value), and the old
spellings parse as the new ones after a one-line notice. No TensorFlow."""

from __future__ import annotations

import argparse

import pytest

from keras_nmt.cli import COMMANDS, table
from keras_nmt.cli.common import OneLineParser
from support import ROOT

DOC = ROOT / "docs" / "cli.md"


@pytest.fixture(scope="module")
def tables():
    return table.parsers_tables()


def test_the_docs_table_is_the_parsers(tables):
    text = DOC.read_text("utf-8")
    assert table.replace_table(text, table.markdown(tables)) == text, (
        "docs/cli.md is stale: run python -m keras_nmt.cli.table --write")
    assert list(tables) == list(COMMANDS)
    assert tables["lexicon"]["--best"] == "old spelling of `--translations`"
    assert tables["average"]["--best"] == "N"
    assert tables["export"]["--quiet"] == table.FLAG


def test_the_table_command_prints_or_rewrites_the_docs_table(tmp_path, monkeypatch, capsys,
                                                             tables):
    expected = table.markdown(tables)
    assert table.main([]) == 0
    assert capsys.readouterr().out == expected
    doc = tmp_path / "cli.md"
    doc.write_text(f"# Options\n\n{table.BEGIN}\nstale rows\n{table.END}\n\nafter\n",
                   encoding="utf-8")
    monkeypatch.setattr(table, "DOC", doc)
    assert table.main(["--write"]) == 0
    assert doc.read_text("utf-8") == (
        f"# Options\n\n{table.BEGIN}\n{expected}{table.END}\n\nafter\n")
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="lacks the markers"):
        table.replace_table("# Options without a table\n", expected)


def test_every_shared_spelling_has_one_rule_and_one_kind(tables):
    rules = DOC.read_text("utf-8").split("## One meaning per spelling")[1].split("\n## ")[0]
    shared = table.shared(tables)
    assert {"--src", "--name", "--quiet", "--nbest", "--attention"} <= set(shared)
    for spelling, commands in shared.items():
        assert f"`{spelling}" in rules, f"{spelling} ({', '.join(commands)}) has no rule"
        kinds = {tables[c][spelling] == table.FLAG for c in commands}
        assert len(kinds) == 1, f"{spelling} is on/off in some of {commands} and not in others"
    # The clashes that were: each spelling now means one thing.
    assert {tables[c]["--src"] for c in shared["--src"]} == {"FILE"}
    assert {tables[c]["--attention"] for c in shared["--attention"]} == {"FILE.jsonl"}
    assert {tables[c]["--nbest"] for c in shared["--nbest"]} == {"N"}
    assert "--model" not in shared and "--version" not in shared


def test_quiet_everywhere_but_the_server(tables):
    assert [c for c, options in tables.items() if "--quiet" not in options] == ["serve"]


def parse(command: str, argv: list[str]) -> argparse.Namespace:
    return table.parsers()[command].parse_args(argv)


def notice(command: str, old: str, new: str) -> str:
    return (f"keras-nmt {command}: warning: {old} is deprecated, use {new} (the old spelling "
            "goes in the next release)")


@pytest.mark.parametrize("command, old, new, renamed", [
    ("train", ["--src", "de", "--tgt=fr"], ["--src-lang", "de", "--tgt-lang=fr"],
     [("--src", "--src-lang"), ("--tgt", "--tgt-lang")]),
    ("evaluate", ["R", "--src", "s", "--ref", "r", "--align", "a"],
     ["R", "--src", "s", "--ref", "r", "--gold-align", "a"], [("--align", "--gold-align")]),
    ("score", ["R", "--src", "s", "--tgt", "t", "--nbest"],
     ["R", "--src", "s", "--tgt", "t", "--nbest-input"], [("--nbest", "--nbest-input")]),
    ("lexicon", ["R", "--best", "3", "--best=4"], ["R", "--translations", "3", "--translations=4"],
     [("--best", "--translations")]),
    ("export", ["R", "--out", "o", "--attention", "--version", "2"],
     ["R", "--out", "o", "--return-attention", "--model-version", "2"],
     [("--attention", "--return-attention"), ("--version", "--model-version")]),
    ("onnx-translate", ["E", "--version", "2"], ["E", "--model-version", "2"],
     [("--version", "--model-version")]),
    ("tfserving-client", ["--url", "http://h:1", "--model", "m", "--version", "2"],
     ["--url", "http://h:1", "--name", "m", "--model-version", "2"],
     [("--model", "--name"), ("--version", "--model-version")]),
])
def test_an_old_spelling_parses_as_the_new_one_after_one_notice(capsys, command, old, new,
                                                                 renamed):
    assert parse(command, new) == parse(command, old)
    err = capsys.readouterr().err
    assert err.splitlines() == [notice(command, o, n) for o, n in renamed]  # once each


def test_old_spellings_after_a_bare_double_dash_are_values(capsys):
    args = parse("lexicon", ["--best", "3", "--", "--best"])
    assert (args.run_dir, args.best) == ("--best", 3)
    assert capsys.readouterr().err.splitlines() == [notice("lexicon", "--best", "--translations")]


def test_a_new_spelling_is_not_taken_for_an_old_ones_prefix(capsys):
    # argparse alone would read --src as an abbreviation of --src-lang, with no notice.
    assert parse("train", ["--src", "de"]).src == "de"
    assert "--src is deprecated" in capsys.readouterr().err


def test_sentence_splitting_is_on_unless_turned_off():
    for command in ("translate", "evaluate", "export"):
        argv = {"translate": ["RUN"], "evaluate": ["RUN", "--src", "s", "--ref", "r"],
                "export": ["RUN", "--out", "OUT"]}[command]
        assert parse(command, argv).split_sentences is True, command
        assert parse(command, [*argv, "--no-split-sentences"]).split_sentences is False
    # onnx-translate and serve: the export's setting unless told.
    assert parse("onnx-translate", ["EXPORT"]).split_sentences is None
    assert parse("onnx-translate", ["EXPORT", "--no-split-sentences"]).split_sentences is False


def test_rename_needs_an_option_to_rename_to():
    parser = OneLineParser(prog="p")
    parser.add_argument("--new")
    with pytest.raises(ValueError, match="--newer is not an option of p"):
        parser.rename("--old", "--newer")
