"""The SimPy model of the NPU and its Report."""
