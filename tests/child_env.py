"""The environment of a child Python process a test starts: the repository first on
PYTHONPATH, then whatever the parent had there, so an installation that relies on
PYTHONPATH (a wheel unpacked beside the checkout, say) still imports in the child."""

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def child_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}
