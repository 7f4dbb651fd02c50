"""The layers of docs/architecture.md, checked against the package's imports: a module
imports from its own layer and the layers below, never from above, and every module of
the package has a layer. Also the product apart from its lab: only the benchmarks' own
tests import bench/, and bench/ imports only the page's "Public API for scripts"."""

import ast
import pathlib
import re
import tomllib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_nmt"

# Bottom first, as the table of docs/architecture.md "Layers" lists them. A name is a
# module (``rundir``) or a package (``corpus/``, all of its modules).
LAYERS = (
    ("ground", ("core/",)),
    ("data", ("corpus/", "text/", "data/", "lexicon/")),
    ("model", ("layers/", "models/", "search/")),
    ("run directory", ("rundir/",)),
    ("jobs", ("training/", "evaluation/", "decoding/", "export/", "serving/", "web/")),
    ("orchestration", ("runner/",)),
    ("entry points", ("cli/",)),
)
LEVEL = {room: level for level, (_, rooms) in enumerate(LAYERS) for room in rooms}


# The package's root holds its face and, at most, modules that belong to no layer: none
# today. A new module goes into the folder of its job.
ROOT_MODULES = ("__init__.py",)


def room_of(module: str, package: pathlib.Path = PACKAGE) -> str:
    """``keras_nmt.corpus.readers`` -> ``corpus/``; a module at the root is its own room."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    return parts[0] + "/" if (package / parts[0]).is_dir() else parts[0]


def package_modules(package: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    modules = {}
    for path in package.rglob("*.py"):
        parts = ["keras_nmt", *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("keras_nmt"):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(name for name in names if name in modules)
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("keras_nmt"))
    return found


def layer_problems(package: pathlib.Path = PACKAGE) -> list[str]:
    """What breaks the layers in ``package``: a module at the root beyond ROOT_MODULES, a
    room with no layer, a layer's room that is gone, an import from a layer above."""
    problems = [f"{path.name} at the package's root: move it into the folder of its job"
                for path in sorted(package.glob("*.py")) if path.name not in ROOT_MODULES]
    modules = package_modules(package)
    rooms = {room_of(module, package) for module in modules} - {""}
    problems += [f"{room}: a room with no layer" for room in sorted(rooms - set(LEVEL))
                 if room.endswith("/")]
    problems += [f"{room}: a layer's room that no longer exists"
                 for room in sorted(set(LEVEL) - rooms)]
    for module, path in sorted(modules.items()):
        room = room_of(module, package)
        for target in sorted(imported(path, modules)):
            other = room_of(target, package)
            if room in LEVEL and other in LEVEL and LEVEL[other] > LEVEL[room]:
                problems.append(f"{module} ({LAYERS[LEVEL[room]][0]}) imports {target} "
                                f"({LAYERS[LEVEL[other]][0]})")
    return problems


def test_the_package_keeps_its_layers():
    """Every module in the folder of a layer, importing only from its layer and below."""
    assert layer_problems() == []


def test_the_layer_checks_fail_on_a_root_module_an_upward_import_and_a_new_room(tmp_path):
    package = tmp_path / "keras_nmt"
    for room in {room.rstrip("/") for room in LEVEL}:
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("", encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "loose.py").write_text("", encoding="utf-8")
    (package / "core" / "ground.py").write_text(
        "def f():\n    from keras_nmt.decoding import translation\n", encoding="utf-8")
    (package / "decoding" / "translation.py").write_text(
        "from keras_nmt.core import ground\n", encoding="utf-8")
    (package / "misc").mkdir()
    (package / "misc" / "__init__.py").write_text("", encoding="utf-8")
    assert layer_problems(package) == [
        "loose.py at the package's root: move it into the folder of its job",
        "misc/: a room with no layer",
        "keras_nmt.core.ground (ground) imports keras_nmt.decoding (jobs)",
        "keras_nmt.core.ground (ground) imports keras_nmt.decoding.translation (jobs)",
    ]


@pytest.mark.parametrize("room, level", [("rundir/", "run directory"), ("corpus/", "data"),
                                         ("search/", "model"), ("cli/", "entry points")])
def test_the_layers_are_those_the_architecture_page_draws(room, level):
    assert LAYERS[LEVEL[room]][0] == level
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith(f"| {level} |")]
    assert len(rows) == 1 and f"`{room.rstrip('/')}" in rows[0]


# ---- the product's tests apart from its benchmarks ---------------------------------------

ROOT = PACKAGE.parent
# A string that names a module of bench/ (``python -m bench.NAME``, ``import_module``).
BENCH_NAME = re.compile(r"(bench|experiments)\.[\w.]*")
# The scripts outside the package: the benchmarks and the one-off experiments (on bench's
# harness). Only their own tests may import them.
SCRIPT_FOLDERS = ("bench", "experiments")
PACKAGE_NAME = re.compile(r"keras_nmt(\.\w+)*")


def import_nodes(tree: ast.AST):
    """The import statements of ``tree``, at the top or inside a function, and those of
    the Python code its strings hold (what it runs in a child interpreter)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            for code in code_trees(node.value):
                yield from import_nodes(code)


def code_trees(text: str) -> list[ast.AST]:
    """``text`` parsed as Python; a piece of code that an f-string's values cut (which
    does not parse whole), line by line."""
    try:
        return [ast.parse(text)]
    except SyntaxError:
        pass
    trees = []
    for line in text.splitlines():
        try:
            trees.append(ast.parse(line.strip()))
        except SyntaxError:
            continue
    return trees


def strings(tree: ast.AST) -> list[str]:
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def imports_bench(path: pathlib.Path) -> list[str]:
    """What of bench/ or experiments/ ``path`` imports or names as a module to run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in import_nodes(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif node.level == 0 and node.module:
            names.append(node.module)
    names += [text for text in strings(tree) if BENCH_NAME.fullmatch(text)]
    return sorted({name for name in names if name.split(".")[0] in SCRIPT_FOLDERS})


def package_imports(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules ``path`` uses: ``from keras_nmt.x import y`` is ``keras_nmt.x.y``
    where y is a module, else ``keras_nmt.x``; also the modules its strings name to run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in import_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("keras_nmt"))
        elif node.level == 0 and node.module and node.module.split(".")[0] == "keras_nmt":
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in modules else node.module)
    found.update(text for text in strings(tree)
                 if PACKAGE_NAME.fullmatch(text) and text in modules)
    return found


def is_bench_test(path: pathlib.Path) -> bool:
    return path.name.startswith("test_bench")


def public_for_scripts() -> dict[str, str]:
    """The modules of docs/architecture.md "Public API for scripts": name -> its line."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## Public API for scripts\n", 1)[1].split("\n## ", 1)[0]
    return {match.group(1): line for line in section.splitlines()
            if (match := re.match(r"- `(keras_nmt[\w.]*)`", line))}


def test_only_the_benchmarks_tests_import_bench():
    """The product's tests stand without bench/ and experiments/: a change to a benchmark
    cannot fail them."""
    # This module names bench only in the example its checks are tried on.
    offenders = {path.name: imports_bench(path) for path in sorted((ROOT / "tests").glob("*.py"))
                 if not is_bench_test(path) and path.name != pathlib.Path(__file__).name}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_helper_checks_see_every_way_of_reaching_bench(tmp_path):
    module = tmp_path / "test_example.py"
    module.write_text(
        "import subprocess, sys\n"
        "def test_a():\n"
        "    from bench.serving_load import Server\n"
        "def test_b():\n"
        "    probe = 'import json\\nimport bench._common as c\\n'\n"
        "    piece = f'import sys\\nimport bench.pipeline as p\\nx = {probe}'\n"
        "    subprocess.run([sys.executable, '-m', 'bench.stdin_stream'])\n"
        "    from experiments import output_layer\n"
        "    subprocess.run([sys.executable, '-m', 'experiments.profile_ops'])\n"
        "def test_c():\n"
        "    from keras_nmt.data import pipelines\n"
        "    from keras_nmt.decoding.keras_translator import Translator\n"
        "    subprocess.run([sys.executable, '-m', 'keras_nmt.cli'])\n", encoding="utf-8")
    assert imports_bench(module) == ["bench._common", "bench.pipeline", "bench.serving_load",
                                     "bench.stdin_stream", "experiments",
                                     "experiments.profile_ops"]
    assert package_imports(module, package_modules()) == {
        "keras_nmt.data.pipelines", "keras_nmt.decoding.keras_translator", "keras_nmt.cli"}


def test_the_benchmarks_tests_carry_the_bench_marker():
    unmarked = []
    for path in sorted((ROOT / "tests").glob("test_bench*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        marks = [ast.unparse(node.value) for node in tree.body if isinstance(node, ast.Assign)
                 and any(getattr(target, "id", "") == "pytestmark" for target in node.targets)]
        if not any("pytest.mark.bench" in mark for mark in marks):
            unmarked.append(path.name)
    assert unmarked == []
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pytest_options = options["tool"]["pytest"]["ini_options"]
    assert any(marker.startswith("bench:") for marker in pytest_options["markers"])
    # Left out of the product's run, and run by CI after it.
    assert "not bench" in pytest_options["addopts"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q -m bench tests" in ci


def test_the_benchmarks_use_only_the_public_api_for_scripts():
    """Every module of the package that bench/ or experiments/ imports is one
    docs/architecture.md lists in "Public API for scripts"; the list names only modules
    that exist."""
    modules = package_modules()
    public = public_for_scripts()
    used = {}
    for path in sorted(path for folder in SCRIPT_FOLDERS for path in (ROOT / folder).glob("*.py")):
        for module in package_imports(path, modules):
            used.setdefault(module, []).append(path.stem)
    assert {module: users for module, users in sorted(used.items()) if module not in public} == {}, (
        "use a public module, or list this one in docs/architecture.md with what is public of it")
    assert sorted(set(public) - set(modules)) == []


DEVELOPMENT_PATHS = re.compile(r"\.\./shared|shared/data|/work/|\.gpu/|/root/")


def test_the_docs_name_no_path_of_a_development_machine():
    """Commands and results in docs/ name a corpus by the directory its page says to make
    (``data/anki-fra-eng``), not where one machine kept it."""
    found = [f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
             for path in sorted((ROOT / "docs").rglob("*")) if path.suffix in (".md", ".json")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for match in [DEVELOPMENT_PATHS.search(line)] if match]
    assert found == []


def test_no_two_module_names_differ_by_a_suffix_only():
    """A module's name says its job, so no name is another's with something added
    (translate, translator, translation were three jobs) and none is used twice. Two
    kinds of pair are the convention, not a clash: ``NAME_graph`` holds the rule of
    ``NAME`` as graph ops (the same job in the other runtime), and ``cli/NAME`` is the
    command ``keras-nmt NAME``, left out here."""
    stems: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if path.stem not in ("__init__", "__main__") and relative.parts[0] != "cli":
            stems.setdefault(path.stem, []).append(str(relative))
    assert {stem: paths for stem, paths in stems.items() if len(paths) > 1} == {}
    pairs = sorted((stems[a][0], stems[b][0]) for a in stems for b in stems
                   if a != b and b.startswith(a) and b != f"{a}_graph")
    assert pairs == []
    twins = sorted(stem for stem in stems if stem.endswith("_graph"))
    assert [twin for twin in twins if twin.removesuffix("_graph") not in stems] == []
