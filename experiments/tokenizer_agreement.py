"""How often the project tokenizer splits a sentence exactly as the Moses tokenizer does.

Reference: sacremoses ``MosesTokenizer(lang).tokenize(text, escape=False)``. The project
tokenizer treats every Unicode space (U+00A0 and U+202F included) as a token boundary,
while sacremoses may keep or handle U+00A0/U+202F differently; so, for this measure only,
every ``\\p{Z}`` character in the input given to sacremoses is first normalised to a plain
space. The project tokenizer gets the raw line.

Usage::

    python -m experiments.tokenizer_agreement --data data [--json FILE] [--show K]

``--data`` is a corpus directory (its ``valid.{en,fr}``) or a directory of corpora
(their ``*/valid.{en,fr}``); the language comes from the suffix. The data files stay
where they are.
"""

from __future__ import annotations

import pathlib
import sys

import regex

from bench import _common
from keras_nmt.text import word as tokenizer

PROG = "experiments.tokenizer_agreement"

_ZSPACE = regex.compile(r"\p{Z}")


def moses_reference(lang: str):
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang=lang)

    def tok(line: str) -> list[str]:
        return moses.tokenize(_ZSPACE.sub(" ", line), escape=False)

    return tok


def measure(path: pathlib.Path, lang: str, show: int, shown: list) -> dict:
    reference = moses_reference(lang)
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    same = 0
    for number, line in enumerate(lines, 1):
        ours = tokenizer.tokenize(line, lang)
        theirs = reference(line)
        if ours == theirs:
            same += 1
        elif len(shown) < show:
            shown.append({"file": str(path), "line": number, "text": line,
                          "ours": ours, "moses": theirs})
    return {"file": f"{path.parent.name}/{path.name}", "lang": lang,
            "sentences": len(lines), "identical": same,
            "agreement": same / len(lines) if lines else 1.0}


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", required=True, type=pathlib.Path,
                help="a corpus directory, or a directory of corpora")
    parser.add_argument("--split", default="valid",
                        help="which files of each corpus to read (default: valid)")
    parser.add_argument("--show", type=int, default=0, metavar="K",
                        help="print the first K disagreements")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)

    files = _common.corpus_files([args.data], [args.split], ("en", "fr"))
    if not files:
        parser.error(f"no {args.split}.en or {args.split}.fr in or under {args.data}")
    shown: list = []
    rows = [measure(p, p.suffix[1:], args.show, shown) for p in files]
    total_n = sum(r["sentences"] for r in rows)
    total_same = sum(r["identical"] for r in rows)
    total = {"sentences": total_n, "identical": total_same,
             "agreement": total_same / total_n if total_n else 1.0}

    for d in shown:
        print(f"--- {d['file']}:{d['line']}\n  text : {d['text']}\n"
              f"  ours : {d['ours']}\n  moses: {d['moses']}", file=sys.stderr)
    width = max(len(r["file"]) for r in rows + [{"file": "TOTAL"}])
    print(f"{'file':<{width}}  {'sentences':>9}  {'identical':>9}  {'agreement':>9}")
    for r in rows + [dict(total, file="TOTAL")]:
        print(f"{r['file']:<{width}}  {r['sentences']:>9}  {r['identical']:>9}  "
              f"{100 * r['agreement']:>8.2f}%")
    bench.write({"files": rows, "total": total, "disagreements": shown},
                {"data": str(args.data), "split": args.split})
    return 0


if __name__ == "__main__":
    sys.exit(main())
