"""Whether the SavedModel's text ops give the Python rules' bytes on real text.

The tokenizer, detokenizer and sentence splitter run in Python (``regex``) on every path
but the SavedModel, which runs the same rewrite tables as TensorFlow graph ops (RE2):
:mod:`keras_nmt.text.twin_check`. This compares the two on every line of the given files
(the language from each file's suffix, ``.en``/``.fr``/...), in chunks, and lists the
code points where the two engines' Unicode tables put a class apart. With ``--js``, the
same for the JavaScript rules of the web export (Node.js on the rules as data,
:mod:`keras_nmt.web.rules_check`) against the Python rules, token words included.

Usage::

    python -m bench.text_agreement --data DIR [--data DIR ...] [--splits train,valid] \\
        [--show 5] [--js] [--json out.json]

``--data``: a corpus directory (its SPLIT.LANG files) or a directory of corpora.
"""

from __future__ import annotations

import pathlib
import sys
import unicodedata

from bench import _common
from keras_nmt.text.twin_check import RULES, class_differences, twin_differences
from keras_nmt.web import rules_check

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


def checks(js: bool) -> dict[str, tuple]:
    """Name prefix -> (its rules, the comparison: lines, lang -> per rule the differing
    indices): the graph twins', and with ``js`` the JavaScript rules' ("js tokenize"...)."""
    found = {"": (RULES, twin_differences)}
    if js:
        found["js "] = (rules_check.RULES, rules_check.js_differences)
    return found


def rule_names(js: bool) -> list[str]:
    return [prefix + rule for prefix, (rules, _) in checks(js).items() for rule in rules]


def compare(path: pathlib.Path, show: int, js: bool = False) -> dict:
    lang = path.suffix[1:]
    differing = {name: 0 for name in rule_names(js)}
    shown = []
    lines = 0
    for chunk in chunks(path):
        for prefix, (_, check) in checks(js).items():
            for rule, where in check(chunk, lang).items():
                differing[prefix + rule] += len(where)
                shown += [{"rule": prefix + rule, "line": lines + i + 1, "text": chunk[i]}
                          for i in where[:max(0, show - len(shown))]]
        lines += len(chunk)
    return {"file": f"{path.parent.name}/{path.name}", "lang": lang, "lines": lines,
            "differing": differing, "examples": shown}


def js_classes(langs) -> dict:
    """Per class of the languages' tables, the code points Node.js and regex read apart,
    as ranges, and whether they are rules_check.KNOWN_JS_DIFFERENCES's."""
    def named(first: int, last: int) -> str:
        return f"U+{first:04X}" + (f"-U+{last:04X}" if last != first else "")

    found = rules_check.class_differences(rules_check.table_classes(sorted(set(langs))))
    return {name: {"code_points": len(points),
                   "ranges": [named(*run) for run in rules_check.as_ranges(points)],
                   "known": rules_check.as_ranges(points)
                   == rules_check.KNOWN_JS_DIFFERENCES.get(name, ())}
            for name, points in found.items()}


def build_parser():
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", action="append", required=True, type=pathlib.Path,
                help="a corpus directory, or a directory of corpora (repeatable)")
    parser.add_argument("--splits", default="train,valid",
                        help="the files of each corpus to read (default: train,valid)")
    parser.add_argument("--show", type=int, default=5, metavar="K",
                        help="keep the first K differing lines of each file")
    parser.add_argument("--js", action="store_true",
                        help="also compare the JavaScript rules (Node.js) with the Python rules")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.js:
        try:
            rules_check.node()
        except rules_check.NodeMissing as missing:
            parser.error(str(missing))
    bench = _common.Bench(PROG, args, argv)
    splits = args.splits.split(",")
    files = _common.corpus_files(args.data, splits)
    if not files:
        parser.error(f"no {args.splits} files in or under {', '.join(map(str, args.data))}")
    rows = []
    for path in files:
        rows.append(compare(path, args.show, args.js))
        bench.log(f"{rows[-1]['file']}: {rows[-1]['lines']:,} lines, differing "
                  f"{rows[-1]['differing']}")
    classes = {name: {"code_points": len(points),
                      "assigned_in_python": [f"U+{c:04X}" for c in points
                                             if unicodedata.category(chr(c)) != "Cn"]}
               for name, points in class_differences().items()}
    names = rule_names(args.js)
    total = {"lines": sum(r["lines"] for r in rows),
             "differing": {rule: sum(r["differing"][rule] for r in rows) for rule in names}}
    for row in rows + [total]:
        row.update(row.pop("differing"))
    print(_common.table(rows + [dict(total, file="TOTAL", lang="")],
                        [("file", "file", ""), ("lines", "lines", ","),
                         *((rule, rule + " differs", "") for rule in names)]))
    print(_common.table([{"name": name, **found, "assigned": len(found["assigned_in_python"])}
                         for name, found in classes.items()],
                        [("name", "class", ""), ("code_points", "read apart", ","),
                         ("assigned", "of them assigned in Python's Unicode", "")]))
    results = {"files": rows, "total": total, "classes": classes,
               "unicode": {"python": unicodedata.unidata_version}}
    if args.js:
        results["js_classes"] = js_classes(row["lang"] for row in rows)
        print(_common.table([{"name": name, **found}
                             for name, found in results["js_classes"].items()],
                            [("name", "class", ""), ("code_points", "read apart by Node.js", ","),
                             ("known", "as listed", "")]))
    bench.write(results, {"data": [str(d) for d in args.data], "splits": splits, "js": args.js})
    return 0


if __name__ == "__main__":
    sys.exit(main())
