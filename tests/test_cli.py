"""The ``keras-nmt`` command line: subcommands, one-line errors, quiet start-up, the old
spellings, and what gets installed."""

import importlib.metadata
import io
import os
import signal
import subprocess
import sys
import tomllib

import pytest

from keras_nmt import cli
from keras_nmt.cli.common import run_command
from keras_nmt.core.errors import ConfigError
from support import ROOT, STARTUP_NOISE

OLD_RUN = ROOT / "tests" / "fixtures" / "run-0.1.0"
SUBCOMMANDS = ("train", "translate", "evaluate", "score", "average", "lexicon", "export",
               "onnx-translate", "serve", "tfserving-client", "web", "wmt14")


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
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: keras-nmt COMMAND")
    assert err.splitlines()[-1] == "keras-nmt: error: a command is required"


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


def test_the_declared_python_versions_are_the_tested_ones():
    """The tests need Python 3.11 (tomllib, above): the package claims no older one."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["requires-python"] == ">=3.11,<3.13"
    assert "with Python 3.11–3.12," in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.end_to_end
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


# A stand-in for TensorFlow whose import writes start-up noise (STARTUP_NOISE), then a real
# message, then dies the way a missing CUDA library or an illegal instruction makes it die.
FATAL = b"F0000 00:00:1795470963.569001    4580 dso_loader.cc:42] Check failed: libcudnn.so.9 not found"


@pytest.mark.parametrize("death, status", [
    ("os.abort()", -signal.SIGABRT),  # native code aborting: no Python left to report
    ("raise ImportError('libcudart.so.12: cannot open shared object file')", 1),
])
def test_a_failing_tensorflow_import_still_shows_its_messages(tmp_path, death, status):
    package = tmp_path / "tensorflow"
    package.mkdir()
    written = STARTUP_NOISE + FATAL + b"\n"
    (package / "__init__.py").write_text(f"import os\nos.write(2, {written!r})\n{death}\n")
    code = "from keras_nmt.cli.common import quiet_tensorflow; quiet_tensorflow(); print('loaded')"
    result = _run(["-c", code], env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == status and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == FATAL.decode()  # shown, and the noise before it still dropped
    if status == 1:
        assert lines[-1] == "ImportError: libcudart.so.12: cannot open shared object file"
    else:
        assert lines == [FATAL.decode()]


@pytest.mark.end_to_end
def test_the_package_uses_the_tensorflow_backend_whatever_the_shell_says():
    """A shell with KERAS_BACKEND=jax (jax is not installed here: Keras would fail to
    import) still gets TensorFlow's backend in the package's commands and API."""
    code = ("import keras_nmt.models.rnnsearch, keras, os\n"
            "print(keras.backend.backend(), os.environ['KERAS_BACKEND'])")
    result = _run(["-c", code], env={"KERAS_BACKEND": "jax"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["tensorflow", "tensorflow"]


def test_native_noise_is_recognised_line_by_line():
    from keras_nmt.core.progress import NATIVE_NOISE

    for line in STARTUP_NOISE.splitlines() + [
        b"I0523 14:02:03.123456 12345 cpu_feature_guard.cc:227] This TensorFlow binary is "
        b"optimized to use available CPU instructions in performance-critical operations.",
        b"To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        b"TensorFlow with the appropriate compiler flags.",
        b"E0000 00:00:1.5 1 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to "
        b"register factory for plugin cuDNN when one has already been registered",
    ]:
        assert NATIVE_NOISE.fullmatch(line), line
    for line in (FATAL, b"E0000 00:00:1.5 1 cuda_platform.cc:52] failed call to cuInit",
                 b"Illegal instruction", b"Traceback (most recent call last):",
                 b"terminate called after throwing an instance of 'std::bad_alloc'"):
        assert not NATIVE_NOISE.fullmatch(line), line


def test_old_spellings_reach_the_same_commands():
    # Each fails or stops before TensorFlow loads (test_export runs python -m export's
    # errors in process).
    export = _run(["-m", "export", str(OLD_RUN), "--beam", "0"])
    assert export.returncode == 2
    assert export.stderr.strip() == ("export: error: argument --beam: expected a positive "
                                     "integer, got '0' (see --help)")
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
        "import keras_nmt.text.sentences\n"
        "keras_nmt.text.sentencepiece.SentencePieceCodec\n"
        "import keras_nmt.text.codecs, keras_nmt.text.vocab, keras_nmt.core.constants, keras_nmt.rundir.run_directory\n"
        "import keras_nmt.cli, keras_nmt.cli.common, keras_nmt.cli.onnx_translate\n"
        "import keras_nmt.decoding.onnx_translator, keras_nmt.export\n"
        "import keras_nmt.cli.serve, keras_nmt.serving.server, keras_nmt.export.serving_files\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "print(heavy)\n"
    )
    assert _run(["-c", code]).stdout.strip() == "[]"


def test_run_command_statuses():
    stdout, stderr = io.StringIO(), io.StringIO()

    def bug():
        raise ValueError("bad value")

    def fails():
        raise ConfigError("bad value")

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(ValueError):  # not a user error: a traceback
        run_command("p", bug, stdout, stderr)
    assert run_command("p", fails, stdout, stderr) == 2
    assert stderr.getvalue().splitlines()[-1] == "p: error: bad value"
    assert run_command("p", interrupted, stdout, stderr, "stopped") == 130
    assert stderr.getvalue().splitlines()[-1] == "p: stopped"


# The plain install has none of the [train] extra's packages: a fresh interpreter in
# which importing any of them fails, as it would there.
WITHOUT_TRAINING = ("import sys\n"
                    "from keras_nmt import cli\n"
                    "for name in cli.TRAINING_PACKAGES: sys.modules[name] = None\n")


@pytest.mark.parametrize("argv", [["train", "--max-steps", "1"], ["translate", "RUN"],
                                  ["export", "RUN", "--out", "x"],
                                  ["score", "RUN", "--src", "RUN/vocab.en.txt", "--tgt",
                                   "RUN/vocab.en.txt", "--out", "x"]])
def test_training_commands_on_the_plain_install_say_what_to_install(tmp_path, argv):
    argv = [arg.replace("RUN", str(OLD_RUN)) for arg in argv]
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TRAINING + f"sys.exit(cli.main({argv!r}))"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 2, result.stderr
    line, = result.stderr.strip().splitlines()
    assert line.startswith(f"keras-nmt {argv[0]}: error: this command needs the training install")
    assert "pip install 'keras-nmt[train]'" in line
    assert not list(tmp_path.iterdir())  # nothing written


def test_pyproject_keeps_tensorflow_out_of_the_plain_install():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    plain = {requirement.split(">")[0].split("=")[0].split("<")[0].split("[")[0]
             for requirement in project["dependencies"]}
    assert plain == {"numpy", "onnxruntime", "regex", "sentencepiece", "aiohttp", "protobuf",
                     "prometheus-client", "sacremoses"}
    train = " ".join(project["optional-dependencies"]["train"])
    assert "tensorflow>=" in train and "keras>=" in train
