"""The paper's figures and Table 2 as files: PNG images with the numbers beside them.

- Fig. 2: BLEU by source sentence length, one curve per model
  (``fig2_bleu_by_length.png`` + ``.csv``);
- Fig. 3: attention weights of one sentence in grey scale, 0 black and 1 white, source
  words along x and output words along y (``fig3_*.png`` + ``.json``);
- Table 2: training cost and scores of each model, as Markdown (``table2.md``).

Figures are drawn with matplotlib's object API on an Agg canvas: no pyplot, no display,
and no change to the caller's matplotlib backend.
"""

from __future__ import annotations

import csv
import math
import os
import pathlib
import re
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from keras_nmt.core.atomic import json_text
from keras_nmt.evaluation.alignment import write_pharaoh

DPI = 110


def slug(text: str) -> str:
    """A file-name-safe form of a label."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return cleaned or "run"


def _save(figure: Figure, path: pathlib.Path, tight: bool = False) -> None:
    FigureCanvasAgg(figure)
    if tight:  # crop to what is drawn: heat maps vary a lot in shape
        figure.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.15)
    else:
        figure.savefig(path, dpi=DPI)


def bin_label(row: Mapping[str, Any]) -> str:
    """'1-10', '11-20', ..., '71+' for a row of :func:`keras_nmt.evaluation.scoring.bleu_by_length`."""
    if row["max_len"] is None:
        return f"{row['min_len']}+"
    return f"{row['min_len']}-{row['max_len']}"


def bleu_by_length_figure(
    curves: Mapping[str, Sequence[Mapping[str, Any]]], directory: pathlib.Path,
    name: str = "fig2_bleu_by_length",
) -> dict[str, pathlib.Path]:
    """Fig. 2: one curve per model. ``curves`` maps a label to its rows from
    :func:`keras_nmt.evaluation.scoring.bleu_by_length`. Writes NAME.png and NAME.csv (one row per
    model and bin: model, min_len, max_len, sentences, bleu)."""
    directory = pathlib.Path(directory)
    bins = sorted(
        {(row["min_len"], row["max_len"]) for rows in curves.values() for row in rows},
        key=lambda b: b[0],
    )
    position = {b: k for k, b in enumerate(bins)}
    counts: dict[tuple, int] = {}
    for rows in curves.values():
        for row in rows:
            counts[(row["min_len"], row["max_len"])] = row["sentences"]

    figure = Figure(figsize=(7.0, 4.6))
    axes = figure.add_subplot()
    markers = "os^Dvx*P"
    for k, (label, rows) in enumerate(curves.items()):
        xs = [position[(row["min_len"], row["max_len"])] for row in rows]
        ys = [row["bleu"] for row in rows]
        axes.plot(xs, ys, marker=markers[k % len(markers)], linewidth=1.6, label=label)
    axes.set_xticks(range(len(bins)))
    axes.set_xticklabels(
        [f"{bin_label({'min_len': lo, 'max_len': hi})}\nn={counts[(lo, hi)]}" for lo, hi in bins]
    )
    axes.set_xlabel("Source sentence length (tokens)")
    axes.set_ylabel("BLEU")
    axes.set_title("BLEU by source sentence length (Fig. 2)")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    if curves:
        axes.legend(loc="best")
    figure.tight_layout()
    png = directory / f"{name}.png"
    _save(figure, png)

    table = directory / f"{name}.csv"
    with open(table, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "min_len", "max_len", "sentences", "bleu"])
        for label, rows in curves.items():
            for row in rows:
                writer.writerow([
                    label, row["min_len"], "" if row["max_len"] is None else row["max_len"],
                    row["sentences"], f"{row['bleu']:.4f}",
                ])
    return {"png": png, "data": table}


def attention_figure(
    source_tokens: Sequence[str], output_tokens: Sequence[str], attention: np.ndarray,
    path: pathlib.Path, title: str = "", eos: str = "</s>",
    source_name: str = "Source", output_name: str = "Translation",
) -> dict[str, pathlib.Path]:
    """Fig. 3 for one sentence: ``attention`` is [output tokens + EOS, source tokens + EOS]
    (rows and columns beyond the tokens are labelled ``eos``). Writes PATH (PNG) and the
    same name with .json holding the tokens and the weights."""
    path = pathlib.Path(path)
    weights = np.asarray(attention, dtype=np.float64)
    x_labels = list(source_tokens) + [eos] * (weights.shape[1] - len(source_tokens))
    y_labels = list(output_tokens) + [eos] * (weights.shape[0] - len(output_tokens))

    cell = 0.26  # inches per token
    width = max(4.0, 1.8 + cell * weights.shape[1])
    height = max(2.5, 1.2 + cell * weights.shape[0] + 0.07 * max(map(len, x_labels), default=0))
    figure = Figure(figsize=(width, height))
    axes = figure.add_subplot()
    image = axes.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
    axes.xaxis.tick_top()
    axes.xaxis.set_label_position("top")
    axes.set_xticks(range(len(x_labels)))
    axes.set_xticklabels(x_labels, rotation=90)
    axes.set_yticks(range(len(y_labels)))
    axes.set_yticklabels(y_labels)
    axes.set_xlabel(source_name)
    axes.set_ylabel(output_name)
    if title:
        axes.set_title(title, fontsize=10, pad=10)
    bar = figure.colorbar(image, ax=axes, fraction=0.03, pad=0.02)
    bar.set_label("attention weight")
    _save(figure, path, tight=True)

    data = path.with_suffix(".json")
    data.write_text(json_text({
        "title": title,
        "source_tokens": x_labels,
        "output_tokens": y_labels,
        "attention": weights.round(6).tolist(),
    }, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return {"png": path, "data": data}


TABLE2_COLUMNS = (
    ("model", "Model", None),
    ("updates", "Updates", "{:d}"),
    ("epochs", "Epochs", "{:.2f}"),
    ("wall_hours", "Hours", "{:.2f}"),
    ("train_nll", "Train NLL", "{:.2f}"),
    ("dev_nll", "Dev NLL", "{:.2f}"),
    ("bleu_all", "BLEU All", "{:.2f}"),
    ("bleu_no_unk", "BLEU No UNK", "{:.2f}"),
    ("no_unk_sentences", "No-UNK sentences", "{:d}"),
    ("aer", "AER", "{:.3f}"),
)


def _cell(value: Any, form: str | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if form is None:
        return str(value).replace("|", "\\|")
    if form == "{:d}":
        return form.format(int(value))
    return form.format(value)


def table2_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Table 2 (and Table 1's BLEU columns) as a Markdown table, one row per model; missing
    values (no summary.json, no gold alignment, empty subset) are shown as '-'."""
    columns = [c for c in TABLE2_COLUMNS if c[0] != "aer" or any(r.get("aer") is not None for r in rows)]
    lines = [
        "| " + " | ".join(title for _, title, _ in columns) + " |",
        "|" + "|".join("---" if form is None else "---:" for _, _, form in columns) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(key), form) for key, _, form in columns) + " |")
    return "\n".join(lines) + "\n"


def write_table2(rows: Sequence[Mapping[str, Any]], path: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.write_text(table2_markdown(rows), encoding="utf-8")
    return path


# Fig. 3 sentences chosen by default: the first ones with this many source tokens.
HEATMAP_MIN_TOKENS, HEATMAP_MAX_TOKENS = 8, 30


def choose_heatmap_sentences(
    source_lengths: Sequence[int], count: int,
    min_tokens: int = HEATMAP_MIN_TOKENS, max_tokens: int = HEATMAP_MAX_TOKENS,
) -> list[int]:
    """The first ``count`` sentences with ``min_tokens``..``max_tokens`` source tokens;
    if fewer qualify, the shortest other non-empty ones fill up (a small test set still
    gets its figures)."""
    fitting = [i for i, n in enumerate(source_lengths) if min_tokens <= n <= max_tokens]
    chosen = fitting[:count]
    if len(chosen) < count:
        others = sorted(
            (i for i, n in enumerate(source_lengths) if n > 0 and i not in set(fitting)),
            key=lambda i: (source_lengths[i], i),
        )
        chosen += others[: count - len(chosen)]
    return sorted(chosen)


def write_plots(
    results: Sequence[dict[str, Any]], directory: str | os.PathLike, rows: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """Fig. 2, Fig. 3 (for each run's kept attention), Table 2 and predicted alignments
    into ``directory``; returns the written paths (as strings)."""
    directory = pathlib.Path(directory)
    written: dict[str, Any] = {}
    curves = {r["label"]: r["bleu_by_length"] for r in results}
    fig2 = bleu_by_length_figure(curves, directory)
    written["fig2"] = {k: str(v) for k, v in fig2.items()}
    written["table2"] = str(write_table2(rows, directory / "table2.md"))
    written["fig3"] = []
    slugs = [slug(r["label"]) for r in results]
    for result, name in zip(results, slugs):
        details = result.get("details") or {}
        for index, translation in sorted(details.get("translations", {}).items()):
            if translation.attention is None:
                continue
            rows, columns = translation.attention_labels()  # EOS after each sentence
            files = attention_figure(
                columns, rows, translation.attention,
                directory / f"fig3_{name}_line{index + 1}.png",
                title=f"{result['label']}, line {index + 1} (beam {result['beam_size']})",
                source_name=f"Source ({result.get('src_lang', 'source')})",
                output_name=f"Translation ({result.get('tgt_lang', 'target')})",
            )
            written["fig3"].append({"run": result["label"], "line": index + 1, **{k: str(v) for k, v in files.items()}})
        if details.get("predicted_alignments") is not None:
            path = directory / f"alignments_{name}.align"
            write_pharaoh(path, details["predicted_alignments"])
            written.setdefault("alignments", []).append(str(path))
        if details.get("hypotheses") is not None:
            path = directory / f"translations_{name}.txt"
            path.write_text("".join(h + "\n" for h in details["hypotheses"]), encoding="utf-8")
            written.setdefault("translations", []).append(str(path))
    return written
