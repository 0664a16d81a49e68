"""Off-chip (DRAM) planning: the Tile-Aware Allocator and whole-tensor baselines."""
