"""The CPU's bfloat16 instructions and the precision ``--precision auto`` picks from them.

Pure Python. :func:`cpu_flags` reads the machine (Linux's /proc/cpuinfo, once, at a run's
start); the choice is a function of what it found, so it is the same on any machine
given the same flags.
"""

from __future__ import annotations

from typing import Iterable

AUTO = "auto"
# The bfloat16 matrix instructions, the one reported first: each with the flags it needs
# (AMX-BF16 computes on the AMX tiles).
BFLOAT16_INSTRUCTIONS = (("amx_bf16", ("amx_bf16", "amx_tile")), ("avx512_bf16", ("avx512_bf16",)))


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The instruction flags of the first processor in ``cpuinfo``; empty where there is
    no such file (another OS) or no ``flags`` line."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, colon, value = line.partition(":")
                if colon and key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def bfloat16_support(flags: Iterable[str]) -> str | None:
    """The bfloat16 instruction ``flags`` offer, "amx_bf16" before "avx512_bf16", or None."""
    flags = set(flags)
    for name, needs in BFLOAT16_INSTRUCTIONS:
        if flags.issuperset(needs):
            return name
    return None


def choose_precision(requested: str, flags: Iterable[str], on_gpu: bool) -> tuple[str, str]:
    """(precision, why) for ``--precision requested``: a named precision as it is;
    ``auto``: mixed_bfloat16 where the CPU has a bfloat16 instruction, else float32, and
    float32 where a GPU computes (the CPU's instructions do not; a GPU's mixed precision
    is asked for by name)."""
    if requested != AUTO:
        return requested, f"--precision {requested}"
    if on_gpu:
        return "float32", "auto: a GPU computes, float32"
    found = bfloat16_support(flags)
    if found is None:
        return "float32", "auto: no avx512_bf16 or amx_bf16 found"
    return "mixed_bfloat16", f"auto: {found} found"
