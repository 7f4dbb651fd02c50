"""Whether the SavedModel's text ops give the Python rules' bytes on real text.

The tokenizer, detokenizer and sentence splitter run in Python (``regex``) on every path
but the SavedModel, which runs the same rewrite tables as TensorFlow graph ops (RE2):
:mod:`keras_nmt.text.twin_check`. This compares the two on every line of the given files
(the language from each file's suffix, ``.en``/``.fr``/...), in chunks, and lists the
code points where the two engines' Unicode tables put a class apart.

Usage::

    python -m bench.text_agreement --data DIR [--data DIR ...] [--splits train,valid] \\
        [--show 5] [--json out.json]

``--data``: a corpus directory (its SPLIT.LANG files) or a directory of corpora.
"""

from __future__ import annotations

import pathlib
import sys
import unicodedata

from bench import _common
from keras_nmt.text.twin_check import RULES, class_differences, twin_differences

PROG = "text_agreement"
CHUNK = 20_000


def chunks(path: pathlib.Path, size: int = CHUNK):
    """The file's lines (split at "\\n" only, as the corpus readers split), ``size`` at a
    time: memory holds one chunk, whatever the file's size."""
    chunk: list[str] = []
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            chunk.append(line[:-1] if line.endswith("\n") else line)
            if len(chunk) == size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def compare(path: pathlib.Path, show: int) -> dict:
    lang = path.suffix[1:]
    differing = {rule: 0 for rule in RULES}
    shown = []
    lines = 0
    for chunk in chunks(path):
        for rule, where in twin_differences(chunk, lang).items():
            differing[rule] += len(where)
            shown += [{"rule": rule, "line": lines + i + 1, "text": chunk[i]}
                      for i in where[:max(0, show - len(shown))]]
        lines += len(chunk)
    return {"file": f"{path.parent.name}/{path.name}", "lang": lang, "lines": lines,
            "differing": differing, "examples": shown}


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", action="append", required=True, type=pathlib.Path,
                help="a corpus directory, or a directory of corpora (repeatable)")
    parser.add_argument("--splits", default="train,valid",
                        help="the files of each corpus to read (default: train,valid)")
    parser.add_argument("--show", type=int, default=5, metavar="K",
                        help="keep the first K differing lines of each file")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)
    splits = args.splits.split(",")
    files = _common.corpus_files(args.data, splits)
    if not files:
        parser.error(f"no {args.splits} files in or under {', '.join(map(str, args.data))}")
    rows = []
    for path in files:
        rows.append(compare(path, args.show))
        bench.log(f"{rows[-1]['file']}: {rows[-1]['lines']:,} lines, differing "
                  f"{rows[-1]['differing']}")
    classes = {name: {"code_points": len(points),
                      "assigned_in_python": [f"U+{c:04X}" for c in points
                                             if unicodedata.category(chr(c)) != "Cn"]}
               for name, points in class_differences().items()}
    total = {"lines": sum(r["lines"] for r in rows),
             "differing": {rule: sum(r["differing"][rule] for r in rows) for rule in RULES}}
    for row in rows + [total]:
        row.update(row.pop("differing"))
    print(_common.table(rows + [dict(total, file="TOTAL", lang="")],
                        [("file", "file", ""), ("lines", "lines", ","),
                         *((rule, rule + " differs", "") for rule in RULES)]))
    print(_common.table([{"name": name, **found, "assigned": len(found["assigned_in_python"])}
                         for name, found in classes.items()],
                        [("name", "class", ""), ("code_points", "read apart", ","),
                         ("assigned", "of them assigned in Python's Unicode", "")]))
    bench.write({"files": rows, "total": total, "classes": classes,
                 "unicode": {"python": unicodedata.unidata_version}},
                {"data": [str(d) for d in args.data], "splits": splits})
    return 0


if __name__ == "__main__":
    sys.exit(main())
