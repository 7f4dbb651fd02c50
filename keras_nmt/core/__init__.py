"""The ground every layer stands on: reserved ids, errors, fault hooks, atomic writes,
progress, the configuration, distribution and XLA policy."""
