"""One-off experiments of keras-nmt: the measurements that chose a design, kept so that
the figures docs/experiments.md and docs/benchmarks.md quote from them can be made again.

    python -m experiments.NAME [options]  # from the checkout's root; --help for each

They are not the benchmarks a user runs to measure a machine or our claims (those are
bench/), and not part of the package: pip installs neither folder. They use bench's
harness (:mod:`bench._common`: the options, the JSON report, the machine's matmul rate)
and, like bench/, only the package's public API for scripts (docs/architecture.md).

- ``output_layer``: the output layer's pieces timed alone (the search's two-stage top-k)
- ``profile_ops``: the TensorFlow profiler's op-type summary of training or of the search
- ``onnx_side_by_side``: several ONNX exports timed in turn, round by round
- ``shuffle_cost``: a whole-corpus permutation per epoch against a shuffle buffer
- ``stream_memory``: peak memory of a short training run as the corpus grows
- ``tokenizer_agreement``: the word tokenizer against the Moses tokenizer
- ``sentencepiece_parity``: SentencePiece in the graph against the Python library
"""
