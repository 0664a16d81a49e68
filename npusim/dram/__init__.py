"""A DRAM device with banks and rows (``dram.model: banks``): presets, address mapping, the
controller's bank-state kernel (C: ``npusim/native/bank_core.h``) with its pure-Python reference, and
the model the simulator drives with the DMA's planned addresses (``npusim.dram.model``)."""
