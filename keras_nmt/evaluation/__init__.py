"""The paper's evaluation, by concern.

- :mod:`~keras_nmt.evaluation.scoring`: BLEU / chrF on all sentences and on the No-UNK
  subset, BLEU by sentence length (Fig. 2's numbers), Table 2 rows, one run's report;
- :mod:`~keras_nmt.evaluation.alignment`: Pharaoh files, forced attention, argmax
  alignments and AER;
- :mod:`~keras_nmt.evaluation.plots`: Fig. 2, Fig. 3, Table 2 as files.

``keras-nmt evaluate`` (:mod:`keras_nmt.cli.evaluate`) puts them together.
"""
