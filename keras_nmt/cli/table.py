"""The option table of docs/cli.md, read from the commands' parsers so that it cannot go
stale: every subcommand x every option, with the old spellings that still work.

    python -m keras_nmt.cli.table            print the table
    python -m keras_nmt.cli.table --write    put it into docs/cli.md, between its markers

tests/test_cli_options.py checks that docs/cli.md holds what this prints. Imports every
command module (not TensorFlow): run it with the training install.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
from typing import Sequence

from keras_nmt.cli import COMMANDS, PROG

BEGIN = "<!-- option table: python -m keras_nmt.cli.table --write -->"
END = "<!-- end of option table -->"
POSITIONAL = "(positional)"
FLAG = "flag"
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Subcommand name -> its parser (each command module's ``build_parser``)."""
    return {
        name: importlib.import_module(f"keras_nmt.cli.{module}").build_parser(f"{PROG} {name}")
        for name, (module, _) in COMMANDS.items()
    }


def _value(action: argparse.Action) -> str:
    """What an option takes: FLAG, its choices, or its metavar."""
    if action.nargs == 0:
        return FLAG
    if action.choices:
        return "\\|".join(map(str, action.choices))
    name = action.metavar or (action.dest if not action.option_strings else action.dest.upper())
    return f"{name} ..." if action.nargs in ("+", "*") else name


def options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Spelling -> what it takes, for one parser: its positionals under POSITIONAL, each
    long option, and each old spelling (``--old`` -> ``old spelling of --new``).

    Reads argparse's list of actions (``_actions``): argparse has no public way to list a
    parser's options."""
    table: dict[str, str] = {}
    positionals = []
    for action in parser._actions:  # noqa: SLF001 - see the docstring
        if isinstance(action, argparse._HelpAction):  # noqa: SLF001
            continue
        if not action.option_strings:
            positionals.append(_value(action))
            continue
        for spelling in action.option_strings:
            if spelling.startswith("--"):
                table[spelling] = _value(action)
    if positionals:
        table[POSITIONAL] = " ".join(positionals)
    for old, new in getattr(parser, "renamed", {}).items():
        table[old] = f"old spelling of `{new}`"
    return table


def shared(tables: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Spelling -> the commands whose current options use it, for those used by two or more
    (an old spelling does not count: it goes in the next release)."""
    users: dict[str, list[str]] = {}
    for command, table in tables.items():
        for spelling, value in table.items():
            if spelling != POSITIONAL and not value.startswith("old spelling"):
                users.setdefault(spelling, []).append(command)
    return {spelling: names for spelling, names in sorted(users.items()) if len(names) > 1}


def markdown(tables: dict[str, dict[str, str]] | None = None) -> str:
    """The table: one row per spelling (positionals first), one column per subcommand; a
    cell says what the option takes there, ``flag`` for an on/off option, empty where the
    command has no such option."""
    tables = parsers_tables() if tables is None else tables
    commands = list(tables)
    spellings = sorted({s for table in tables.values() for s in table},
                       key=lambda s: (s != POSITIONAL, s))
    lines = ["| option | " + " | ".join(f"`{c}`" for c in commands) + " |",
             "|---" * (len(commands) + 1) + "|"]
    for spelling in spellings:
        label = POSITIONAL if spelling == POSITIONAL else f"`{spelling}`"
        cells = [tables[c].get(spelling, "") for c in commands]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parsers_tables() -> dict[str, dict[str, str]]:
    return {name: options(parser) for name, parser in parsers().items()}


def replace_table(text: str, table: str) -> str:
    """``text`` (docs/cli.md) with the part between BEGIN and END replaced by ``table``."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{DOC} lacks the markers {BEGIN!r} and {END!r}")
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m keras_nmt.cli.table", description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {DOC}")
    args = parser.parse_args(argv)
    table = markdown()
    if args.write:
        DOC.write_text(replace_table(DOC.read_text("utf-8"), table), encoding="utf-8")
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
