"""Graph (tensorflow_text) against Python (sentencepiece) SentencePiece on real text.

Trains a model per language on a corpus's training side, as ``--tokenizer
sentencepiece`` does, then encodes every line of the valid files both ways and counts
the lines whose ids are identical, and the lines that decode back identically.

Usage::

    python -m experiments.sentencepiece_parity --data data/anki-fra-eng --vocab-size 8000
"""

from __future__ import annotations

import pathlib
import sys

from bench import _common

PROG = "experiments.sentencepiece_parity"


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__)
    _common.add(parser, "data", required=True, type=pathlib.Path)
    _common.add(parser, "src_lang")
    _common.add(parser, "tgt_lang")
    _common.add(parser, "vocab_size", default=8000, help="pieces per language (default 8000)")
    args = parser.parse_args(argv)
    bench = _common.Bench(PROG, args, argv)

    import tensorflow as tf

    from keras_nmt.corpus.readers import find_corpus
    from keras_nmt.text.sentencepiece import SentencePieceCodec, train_sentencepiece
    from keras_nmt.text.sentencepiece_graph import SentencePieceEncoder

    splits = find_corpus(args.data, args.src, args.tgt)
    results = []
    for side, lang in enumerate((args.src, args.tgt)):
        model = train_sentencepiece((pair[side] for pair in splits["train"].pairs()), args.vocab_size)
        python, graph = SentencePieceCodec(model, lang), SentencePieceEncoder(model, lang)
        lines = [pair[side] for pair in splits["valid"].pairs()]
        same_ids = same_text = 0
        for start in range(0, len(lines), 512):
            chunk = lines[start:start + 512]
            graph_ids = graph(tf.constant(chunk), add_eos=False)
            graph_text = graph.decode(graph_ids).numpy()
            for line, ids, text in zip(chunk, graph_ids.to_list(), graph_text):
                same_ids += ids == python.encode(line)
                same_text += text.decode("utf-8") == python.decode(python.encode(line))
        results.append({"lang": lang, "pieces": len(python.vocabulary), "lines": len(lines),
                        "identical_ids": same_ids, "identical_decoding": same_text})
        print(f"{args.data.name} valid.{lang}: {same_ids}/{len(lines)} lines with identical ids, "
              f"{same_text}/{len(lines)} decoded identically ({len(python.vocabulary)} pieces)")
    bench.write(results, {"data": str(args.data), "vocab_size": args.vocab_size})
    return 0


if __name__ == "__main__":
    sys.exit(main())
