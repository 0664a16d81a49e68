"""Plans: the model, JSON I/O, the independent validator and lowering to a Program."""
