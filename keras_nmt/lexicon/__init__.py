"""The lexical table p(t|s): IBM Model 1, the table and its limits, the <unk> dictionary."""
