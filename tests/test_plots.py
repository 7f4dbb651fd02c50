"""Figures and Table 2: files written, readable PNGs, numbers files matching the input."""

import csv
import json

import matplotlib.image
import numpy as np
import pytest

from keras_nmt.evaluation import plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png(path, min_width=200, min_height=150):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert width >= min_width and height >= min_height
    assert image.std() > 0  # not a blank canvas
    return image


ROWS_A = [
    {"min_len": 1, "max_len": 10, "sentences": 5, "bleu": 40.0},
    {"min_len": 11, "max_len": 20, "sentences": 3, "bleu": 30.5},
    {"min_len": 71, "max_len": None, "sentences": 2, "bleu": 10.25},
]
ROWS_B = [
    {"min_len": 1, "max_len": 10, "sentences": 5, "bleu": 20.0},
    {"min_len": 11, "max_len": 20, "sentences": 3, "bleu": 25.0},
    {"min_len": 71, "max_len": None, "sentences": 2, "bleu": 5.0},
]


def test_bleu_by_length_figure_two_curves(tmp_path):
    files = plots.bleu_by_length_figure({"search50": ROWS_A, "encdec50": ROWS_B}, tmp_path)
    assert files["png"] == tmp_path / "fig2_bleu_by_length.png"
    check_png(files["png"])
    with open(files["data"], encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows] == ["search50"] * 3 + ["encdec50"] * 3
    for row, expected in zip(rows, ROWS_A + ROWS_B):
        assert int(row["min_len"]) == expected["min_len"]
        assert (row["max_len"] or None) == (None if expected["max_len"] is None else str(expected["max_len"]))
        assert int(row["sentences"]) == expected["sentences"]
        assert float(row["bleu"]) == pytest.approx(expected["bleu"], abs=1e-4)


def test_bin_labels():
    assert [plots.bin_label(r) for r in ROWS_A] == ["1-10", "11-20", "71+"]


def test_attention_figure_png_and_numbers(tmp_path):
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(4), size=3)  # 2 output tokens + EOS, 3 source + EOS
    files = plots.attention_figure(
        ["the", "red", "car"], ["la", "voiture"], weights, tmp_path / "fig3_x_line1.png",
        title="search50, line 1",
    )
    check_png(files["png"], min_width=150, min_height=150)
    data = json.loads(files["data"].read_text(encoding="utf-8"))
    assert data["source_tokens"] == ["the", "red", "car", "</s>"]
    assert data["output_tokens"] == ["la", "voiture", "</s>"]
    np.testing.assert_allclose(data["attention"], weights, atol=1e-6)


def test_table2_markdown(tmp_path):
    rows = [
        {"model": "search50", "updates": 1165, "epochs": 2.939, "wall_hours": 0.1, "train_nll": 13.354,
         "dev_nll": 32.85, "bleu_all": 57.49, "bleu_no_unk": 58.0, "no_unk_sentences": 900, "aer": 0.25},
        {"model": "ensemble(a|b)", "updates": None, "epochs": None, "wall_hours": None, "train_nll": None,
         "dev_nll": None, "bleu_all": 60.0, "bleu_no_unk": None, "no_unk_sentences": 0, "aer": None},
    ]
    text = plots.table2_markdown(rows)
    lines = text.splitlines()
    assert lines[0] == (
        "| Model | Updates | Epochs | Hours | Train NLL | Dev NLL | BLEU All | BLEU No UNK "
        "| No-UNK sentences | AER |"
    )
    assert lines[2] == "| search50 | 1165 | 2.94 | 0.10 | 13.35 | 32.85 | 57.49 | 58.00 | 900 | 0.250 |"
    assert lines[3] == "| ensemble(a\\|b) | - | - | - | - | - | 60.00 | - | 0 | - |"
    # Without any AER the column is left out.
    assert "AER" not in plots.table2_markdown([dict(rows[1])])
    path = plots.write_table2(rows, tmp_path / "table2.md")
    assert path.read_text(encoding="utf-8") == text


def test_slug():
    assert plots.slug("search30 #2") == "search30-2"
    assert plots.slug("ensemble(a + b)") == "ensemble-a-b"
    assert plots.slug("///") == "run"
