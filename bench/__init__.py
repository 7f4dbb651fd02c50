"""The benchmarks of keras-nmt: one harness, run from the checkout's root as modules.

    python -m bench.NAME [options]        # python -m bench.NAME --help lists them

Every benchmark takes its shared options from :mod:`bench._common` (one spelling each)
and writes one JSON report of one schema (:class:`bench._common.Bench`); docs/benchmarks.md
lists them and compares their figures with the results.
"""
