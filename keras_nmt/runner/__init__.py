"""One training run from its options to its report: the options and the configuration
they resolve to, a new run's data, resuming, adaptation from a parent, and the flow
(``experiment.train``) that wires them to the trainer."""
