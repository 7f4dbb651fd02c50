"""Search settings tuned on a development set: the beam size and the length-normalisation
exponent alpha with the best BLEU (``keras-nmt evaluate --tune``).

Every (beam, alpha) pair of the grid decodes the whole set; alpha changes which finished
hypothesis wins and when the search may stop, so each pair is a decode of its own. Ties in
BLEU (to 0.01) go to the smaller beam (faster), then to alpha nearest 1 (the default).
The result is stored in the run (:meth:`keras_nmt.rundir.run_directory.RunDir.write_search_settings`)
and becomes the default of translate, evaluate and export.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from keras_nmt.evaluation.scoring import bleu

DEFAULT_BEAMS = (1, 2, 5, 10)
DEFAULT_ALPHAS = (0.0, 0.5, 1.0, 1.5)


def tune_search(
    translator, sources: Sequence[str], references: Sequence[str],
    beams: Sequence[int] = DEFAULT_BEAMS, alphas: Sequence[float] = DEFAULT_ALPHAS,
    batch_size: int = 32, shortlist: tuple[int, int] | None = None,
    log: Callable[[str], None] | None = None, split_sentences: bool = True,
    unk_replace: bool | None = None, dictionary: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """BLEU of every (beam, alpha) on (sources, references); the best pair with the grid
    (``split_sentences``, ``unk_replace``, ``dictionary``: as Translator.translate's)."""
    grid = []
    for beam in beams:
        for alpha in alphas:
            start = time.monotonic()
            hypotheses = [t.text for t in translator.translate(
                sources, beam_size=beam, alpha=alpha, batch_size=batch_size, shortlist=shortlist,
                split_sentences=split_sentences, unk_replace=unk_replace, dictionary=dictionary)]
            row = {"beam_size": int(beam), "alpha": float(alpha),
                   "bleu": bleu(hypotheses, references)[0],
                   "seconds": time.monotonic() - start}
            grid.append(row)
            if log:
                log(f"tuning: beam {beam:>2}, alpha {alpha:g}: BLEU {row['bleu']:.2f} "
                    f"({row['seconds']:.1f} s)")
    best = max(grid, key=lambda r: (round(r["bleu"], 2), -r["beam_size"], -abs(r["alpha"] - 1.0)))
    return {"beam_size": best["beam_size"], "alpha": best["alpha"], "bleu": best["bleu"],
            "sentences": len(sources), "shortlist": list(shortlist) if shortlist else None,
            "grid": grid}
