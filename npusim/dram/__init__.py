"""A DRAM device with banks and rows (``dram.model: banks``): presets, address mapping, the
controller's bank-state kernel (Numba) with its pure-Python reference, and the SimPy-facing
model the simulator drives with the DMA's planned addresses (``npusim.dram.model``)."""
