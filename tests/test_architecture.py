"""The layers of docs/architecture.md, checked against the package's imports: a module
imports from its own layer and the layers below, never from above, and every module of
the package has a layer."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_nmt"

# Bottom first, as the table of docs/architecture.md "Layers" lists them. A name is a
# module (``rundir``) or a package (``corpus/``, all of its modules).
LAYERS = (
    ("ground", ("constants", "errors", "faults", "atomic", "progress", "config", "distribute",
                "xla", "model_weights")),
    ("data", ("corpus/", "text/", "vocab", "prepared", "data", "lexicon", "unk_dictionary",
              "unk_replace", "unk_replace_graph", "confidence")),
    ("model", ("layers/", "models", "search/")),
    ("run directory", ("rundir", "ensemble", "averaging")),
    ("jobs", ("training/", "evaluation/", "translation", "translator", "train_options",
              "run_data", "resume", "adaptation", "export/", "serving/")),
    ("orchestration", ("experiment",)),
    ("entry points", ("cli/",)),
)
LEVEL = {room: level for level, (_, rooms) in enumerate(LAYERS) for room in rooms}


def room_of(module: str) -> str:
    """``keras_nmt.corpus.readers`` -> ``corpus/``; ``keras_nmt.rundir`` -> ``rundir``."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    package = (PACKAGE / parts[0]).is_dir()
    return parts[0] + "/" if package else parts[0]


def package_modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["keras_nmt", *path.relative_to(PACKAGE).with_suffix("").parts]
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


def test_every_room_of_the_package_has_a_layer():
    rooms = {room_of(module) for module in package_modules()} - {""}
    assert rooms - set(LEVEL) == set(), "a new room: give it a layer here and in docs/architecture.md"
    assert set(LEVEL) - rooms == set(), "a room that no longer exists"


def test_no_module_imports_from_a_layer_above_its_own():
    modules = package_modules()
    upward = []
    for module, path in sorted(modules.items()):
        room = room_of(module)
        if not room:
            continue
        for target in sorted(imported(path, modules)):
            other = room_of(target)
            if other and LEVEL[other] > LEVEL[room]:
                upward.append(f"{module} ({LAYERS[LEVEL[room]][0]}) imports {target} "
                              f"({LAYERS[LEVEL[other]][0]})")
    assert upward == []


@pytest.mark.parametrize("room, level", [("rundir", "run directory"), ("corpus/", "data"),
                                         ("search/", "model"), ("cli/", "entry points")])
def test_the_layers_are_those_the_architecture_page_draws(room, level):
    assert LAYERS[LEVEL[room]][0] == level
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith(f"| {level} |")]
    assert len(rows) == 1 and f"`{room.rstrip('/')}" in rows[0]
