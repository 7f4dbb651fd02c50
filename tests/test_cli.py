"""The ``keras-nmt`` command line: subcommands, one-line errors, quiet start-up, the old
spellings, and what gets installed."""

import importlib.metadata
import io
import os
import pathlib
import subprocess
import sys
import tomllib

import pytest

from keras_nmt import cli
from keras_nmt.cli.common import run_command

ROOT = pathlib.Path(__file__).resolve().parents[1]
OLD_RUN = ROOT / "tests" / "fixtures" / "run-0.1.0"
SUBCOMMANDS = ("train", "translate", "evaluate", "average", "lexicon", "export", "onnx-translate",
               "tfserving-client", "wmt14")


def _run(args, env=None, input_text=""):
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environ.update(env or {})
    return subprocess.run([sys.executable, *args], input=input_text, capture_output=True,
                          text=True, cwd=ROOT, env=environ, timeout=300)


def test_help_lists_every_subcommand(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert f"\n  {name} " in out, name
    assert tuple(cli.COMMANDS) == SUBCOMMANDS


def test_unknown_command_and_no_command_are_one_line_errors(capsys):
    assert cli.main(["tranlsate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["keras-nmt: error: unknown command 'tranlsate'; commands: "
                   + ", ".join(SUBCOMMANDS) + " (see --help)"]
    assert cli.main([]) == 2


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help_and_one_line_argument_errors(name, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([name, "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: keras-nmt {name}")
    with pytest.raises(SystemExit) as stop:
        cli.main([name, "--no-such-option"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"keras-nmt {name}: error: "), err


def test_the_console_script_is_installed_and_only_keras_nmt_is_packaged():
    scripts = importlib.metadata.entry_points(group="console_scripts", name="keras-nmt")
    assert [s.value for s in scripts] == ["keras_nmt.cli:main"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["keras_nmt*"]
    assert project["project"]["scripts"] == {"keras-nmt": "keras_nmt.cli:main"}


def test_translate_starts_quietly_and_a_users_log_level_wins():
    result = _run(["-m", "keras_nmt.cli", "translate", str(OLD_RUN), "--quiet"],
                  input_text="The queen is strange.\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert result.stderr == ""  # no C++ start-up lines, no cuInit error
    code = ("import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '1'\n"
            "from keras_nmt.cli.common import quiet_tensorflow; quiet_tensorflow()\n"
            "assert os.environ['TF_CPP_MIN_LOG_LEVEL'] == '1'; print('ok')")
    assert _run(["-c", code]).stdout.strip() == "ok"


def test_old_spellings_reach_the_same_commands():
    export = _run(["-m", "export", str(OLD_RUN / "missing"), "--out", "x"])
    assert export.returncode == 2
    assert export.stderr.strip() == f"export: error: run directory not found: {OLD_RUN / 'missing'}"
    train = _run(["train.py", "--variant", "search99"])
    assert train.returncode == 2 and train.stderr.startswith("train.py: error: ")
    for script, prog in (("onnx_translate.py", "onnx_translate"),
                         ("tfserving_client.py", "tfserving_client")):
        result = _run([str(ROOT / "serving" / script), "--help"])
        assert result.returncode == 0 and result.stdout.startswith(f"usage: {prog}"), result.stderr


def test_text_and_onnx_paths_import_no_tensorflow():
    code = (
        "import sys\n"
        "import keras_nmt.text, keras_nmt.text.word, keras_nmt.text.sentencepiece\n"
        "import keras_nmt.text.codecs, keras_nmt.vocab, keras_nmt.constants, keras_nmt.rundir\n"
        "import keras_nmt.cli, keras_nmt.cli.common, keras_nmt.cli.onnx_translate\n"
        "import keras_nmt.serving.onnx_translator, keras_nmt.export\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "print(heavy)\n"
    )
    assert _run(["-c", code]).stdout.strip() == "[]"


def test_run_command_statuses():
    stdout, stderr = io.StringIO(), io.StringIO()

    def fails():
        raise ValueError("bad value")

    def interrupted():
        raise KeyboardInterrupt

    late = [KeyError]
    with pytest.raises(ValueError):  # not a user error (yet): a traceback
        run_command("p", fails, stdout, stderr, late)
    late.append(ValueError)  # a list is read when the error arrives
    assert run_command("p", fails, stdout, stderr, late) == 2
    assert stderr.getvalue().splitlines()[-1] == "p: error: bad value"
    assert run_command("p", interrupted, stdout, stderr, late, "stopped") == 130
    assert stderr.getvalue().splitlines()[-1] == "p: stopped"
