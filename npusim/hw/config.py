"""Hardware description: typed dataclasses, one per block, every field with a unit and a doc.

The YAML keys are the field names. Each field's ``metadata`` gives:
``quantity`` (how the YAML value is parsed, see ``npusim.util.units``; ``int``/``str``/``choice``
for plain values), ``doc`` (one line for hw_configs/README.md) and, for choices, ``choices``.
Values are stored in base units: bytes, Hz, bytes/s, pJ, W, cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from npusim.dram.mapping import MAX_CHANNELS as MAX_DRAM_CHANNELS  # (npusim.dram is an earlier room: pure data there)


#: Upper limits of counts: each core, stream and DMA channel is a simulated resource and a
#: queue, so a count no NPU has (``cores.count: 10000000``) would only exhaust the machine.
MAX_UNITS = 4096
#: The most streams: a command's queue is a one-byte code (npusim.plan.command_table), the DMA
#: queues' (load, store) and the streams' below 127 (a margin for a third DMA queue).
MAX_STREAMS = 124
#: Rows, columns and lanes: 65,536 covers any array built (the largest, 256 x 256, and beyond).
MAX_WIDTH = 65536
#: Most entries of a DRAM controller's queue (real ones hold 8 to 64: DRAMsim3's default command
#: queue is 8, Ramulator 2's read/write queues 32): the banks model copies its queues for each
#: look-ahead, so a deeper one costs CPU in proportion and, past the accesses in flight, changes
#: nothing.
MAX_DRAM_QUEUE = 1024
MAX_BANK_QUEUE = 256
#: 1 PiB of scratchpad and a 1 GiB DRAM burst are far beyond any memory built; past them the
#: SRAM table's power law and the burst-count kernel's 64-bit counts would overflow.
MAX_SCRATCHPAD = 1 << 50
MAX_BURST = 1 << 30


def knob(default, quantity: str, doc: str, **extra):
    """A hardware field with its unit and description (read by the loader and the docs);
    ``maximum`` (optional) is the largest value the loader accepts."""
    return field(default=default, metadata={"quantity": quantity, "doc": doc, **extra})


#: Loop dimensions an array can unroll (ZigZag's layer dimensions, ``npusim.hw.mapping``) and the
#: operands a local level can hold (W weights, I inputs, O outputs and partial sums).
LOOP_DIMS = ("B", "G", "K", "C", "OY", "OX", "FY", "FX")
OPERANDS = ("W", "I", "O")
#: Capacity from which a local level's figures default to the CACTI table (its smallest macro).
CACTI_MIN_BYTES = 1024


@dataclass(frozen=True)
class LocalLevel:
    """A memory level of every core between its PEs and the scratchpad (``cores.levels``), as
    ZigZag describes one (``memories`` of its accelerator YAML): what it holds, how big one
    instance is, how wide its ports are, what an access costs, and which unrolled array
    dimensions share one instance (``shared_over``, ZigZag's ``served_dimensions``). Levels are
    listed innermost first; ``npusim.hw.mapping`` computes their reads and writes per op."""

    name: str = field(default="", metadata={"quantity": "str", "doc": "the level's name (its key)"})
    operands: tuple[str, ...] = knob(("W", "I", "O"), "operands", "operands it holds: W (weights), I (inputs), "
                                     "O (outputs and partial sums)")
    size: int = knob(1024, "size", "capacity of one instance", maximum=MAX_SCRATCHPAD)
    shared_over: tuple[str, ...] | None = knob((), "dims", "unrolled loop dimensions (cores.unroll keys) whose "
                                               "PEs share one instance (ZigZag's served_dimensions); all: one "
                                               "instance per core; []: one per PE")
    port_bits: int = knob(64, "int", "bits one port moves per cycle, and the word an access costs "
                          "read_energy / write_energy for", maximum=1 << 20)
    min_access_bits: int = knob(0, "int", "smallest access: a transfer of fewer bits costs this many "
                                "(ZigZag's bandwidth_min); 0: port_bits", minimum=0, maximum=1 << 20)
    read_ports: int = knob(1, "int", "read ports, each port_bits wide", maximum=64)
    write_ports: int = knob(1, "int", "write ports, each port_bits wide", maximum=64)
    read_energy: float | None = knob(None, "energy", "one read of port_bits; default: the CACTI table for "
                                     "size and port_bits (1 KiB and up; a smaller level must set it)")
    write_energy: float | None = knob(None, "energy", "one write of port_bits; default: as read_energy")
    cell: str = knob("lop", "choice", "SRAM flavour of the CACTI table for the defaults", choices=("lop", "lstp", "hp"))
    leakage: float | None = knob(None, "power", "leakage of one instance; default: the CACTI table (1 KiB and "
                                 "up), else 0 (registers: part of energy.pe_leakage)")
    area: float | None = knob(None, "area", "area of one instance; default: the CACTI table (1 KiB and up), "
                              "else size x 8 x area.register_bit")


@dataclass(frozen=True)
class CoreConfig:
    """One core: a systolic PE array plus a vector unit. All cores are identical."""

    count: int = knob(1, "int", "number of identical cores (see split_ops for how streams use them)",
                      maximum=MAX_UNITS)
    pe_rows: int = knob(16, "int", "rows R of the systolic PE array", maximum=MAX_WIDTH)
    pe_cols: int = knob(16, "int", "columns C of the systolic PE array", maximum=MAX_WIDTH)
    dataflow: str = knob("os", "choice", "array dataflow: os (output stationary), ws (weight stationary) or "
                         "is (input stationary)", choices=("os", "ws", "is"))
    fold_overlap: bool = knob(False, "bool", "overlap one fold's fill with the previous fold's drain and preload "
                              "the next fold's stationary operand while this one streams (TPU-style); false: "
                              "folds back to back, as SCALE-Sim counts them")
    stream_bands: int = knob(8, "int", "bands an op streams its operands and results in (a semaphore per band "
                             "between the DMA and the core), so an op's loads, compute and stores overlap; at most "
                             "one band per fold (array) or vector pass; 1: load, compute and store in series",
                             maximum=MAX_WIDTH)
    gemv: str = knob("array", "choice", "where GEMMs too thin for the array run (a decode step's matrix-vector "
                     "products): array (always on the array, as SCALE-Sim) or fastest (on the vector lanes "
                     "when MACs / vector_lanes is below the array's fold cycles)", choices=("array", "fastest"))
    accumulator_size: int = knob(0, "size", "partial-sum storage in each core outside the scratchpad (an os "
                                 "array's PE accumulators: rows x cols x 4 B; a ws/is array's accumulator "
                                 "memory): a K-split output block whose 32-bit partial sums fit keeps them "
                                 "there between reduction slices; 0: partial sums go to the scratchpad",
                                 minimum=0, maximum=MAX_SCRATCHPAD)
    depthwise: str = knob("array", "choice", "how grouped and depthwise convs run: array (groups packed across "
                          "the columns, one channel per column), vector (kernel-window MACs on the vector "
                          "lanes) or groups (one GEMM per group, one column each)",
                          choices=("array", "vector", "groups"))
    vector_lanes: int = knob(16, "int", "element-wise operations per cycle of the vector unit", maximum=MAX_WIDTH)
    split_ops: bool = knob(True, "bool", "with fewer streams than cores, split every op of a stream across "
                           "count // streams cores (by output channels, rows or batch; they share the "
                           "scratchpad's bandwidth); false: one core per stream, the others idle")
    power_gating: bool = knob(False, "bool", "an idle core leaks nothing: its PEs' and lanes' leakage is charged "
                              "only while it computes; false: every core leaks for the whole run")
    stationary_register: int = knob(0, "size", "register file per PE holding the stationary operand (ws: "
                                    "weights, is: inputs), read once per MAC and written once per operand "
                                    "loaded; 0: no such level", minimum=0)
    accumulator_register: int = knob(0, "size", "register per PE holding the partial sum, read and written "
                                     "once per MAC; 0: no such level", minimum=0)
    unroll: tuple[tuple[str, int], ...] = knob((), "unroll", "spatial unrolling, one entry per array dimension: "
                                               "the loop dimension it unrolls (B, G, K, C, OY, OX, FY, FX) and by "
                                               "how much, e.g. {K: 32, C: 2, OX: 4, OY: 4} (ZigZag's "
                                               "operational_array + spatial_mapping); replaces pe_rows x pe_cols "
                                               "and dataflow; empty: the R x C array")
    systolic: tuple[str, ...] = knob((), "dims", "unrolled dimensions (unroll keys) along which results drain "
                                     "through the array, one cycle per PE, once per op (ZigZag's "
                                     "systolic_dimensions)")
    partial_sum_bits: int = knob(0, "int", "bits of a partial sum in the PEs and local levels; 0: twice the "
                                 "input's (ZigZag's default)", minimum=0, maximum=128)
    levels: tuple[LocalLevel, ...] = knob((), "levels", "memory levels between the PEs and the scratchpad, "
                                          "innermost first, by name (cores.levels.NAME.FIELD; fields below); "
                                          "needs unroll")

    @property
    def pes(self) -> int:
        """PEs of one core: the product of the unrolled dimensions, else rows x cols."""
        if self.unroll:
            n = 1
            for _, u in self.unroll:
                n *= u
            return n
        return self.pe_rows * self.pe_cols

    def instances(self, level: LocalLevel) -> int:
        """Instances of ``level`` in one core: one per combination of the unrolled dimensions it
        is not shared over."""
        n = 1
        for dim, u in self.unroll:
            if level.shared_over is not None and dim not in level.shared_over:
                n *= u
        return n


@dataclass(frozen=True)
class ScratchpadConfig:
    size: int = knob(1024**2, "size", "capacity of the on-chip scratchpad", maximum=MAX_SCRATCHPAD)
    banks: int = knob(1, "int", "number of banks: each an SRAM macro of size / banks bytes with a port of "
                      "bytes_per_cycle / banks bytes (sets energy per byte, leakage and area)", maximum=MAX_WIDTH)
    bytes_per_cycle: int = knob(64, "int", "bytes per cycle the cores can read+write (bounds compute)")
    alignment: int = knob(64, "size", "every allocation starts at a multiple of this many bytes")
    cell: str = knob("lop", "choice", "SRAM flavour of the CACTI table (npusim/hw/sram_table.py): lop (low "
                     "operating power), lstp (low standby power: slow, barely leaks) or hp (high "
                     "performance: fast, leaky)", choices=("lop", "lstp", "hp"))
    min_access_bits: int = knob(8, "int", "smallest access of an unrolled core (cores.unroll) to the "
                                "scratchpad: a transfer of fewer bits costs this many (ZigZag's "
                                "bandwidth_min)", minimum=1, maximum=1 << 20)


@dataclass(frozen=True)
class DmaConfig:
    channels: int = knob(2, "int", "transfers in flight at once", maximum=MAX_UNITS)
    setup_cycles: float = knob(64.0, "cycles", "cycles to set up one descriptor (a transfer of a view of more "
                               "than max_dims dimensions takes several)")
    chunk_cycles: float = knob(4.0, "cycles", "address-generation cycles per contiguous chunk (row) of a strided "
                               "view, pipelined with the data")
    burst_bytes: int = knob(64, "size", "DRAM burst: a transfer moves every burst its chunks touch (a burst "
                            "shared by adjacent chunks once)", maximum=MAX_BURST)
    max_dims: int = knob(4, "int", "dimensions of a strided view one descriptor covers (contiguous "
                         "dimensions merged into one)")


@dataclass(frozen=True)
class DramConfig:
    bandwidth: float = knob(25.6e9, "bandwidth", "peak bandwidth: the transfers of the earliest step in flight "
                            "share it, later ones wait (npusim/sim/bandwidth.py)")
    latency: float = knob(100e-9, "time", "fixed latency added to every transfer")
    capacity: int = knob(4 * 1024**3, "size", "capacity of the off-chip memory (dram.model: banks gives the part the rows it needs, a power of two per bank)")
    layout: str = knob("nhwc", "choice", "layout of image-like tensors (rank >= 3 with channels in dim 1) in "
                       "DRAM: nhwc (channels last) or nchw (ONNX's order)", choices=("nhwc", "nchw"))
    model: str = knob("bandwidth", "choice", "bandwidth: a fair-shared bus plus a fixed latency (fast); banks: "
                      "a device with banks and rows driven by the plan's DRAM addresses (npusim/dram/)",
                      choices=("bandwidth", "banks"))
    device: str = knob("lpddr4-3200", "choice", "DRAM part of dram.model: banks (presets and their sources in "
                       "npusim/dram/presets.py); its pins run at the rate dram.bandwidth needs",
                       choices=("lpddr4-3200", "lpddr4x-4266", "lpddr5-6400", "ddr4-3200", "ddr5-4800",
                                "hbm2-2000", "hbm2e-3200", "hbm3-6400"))
    channels: int = knob(0, "int", "channels of dram.device (a power of two); 0: as many as dram.bandwidth "
                         "needs at the device's nominal rate", minimum=0, maximum=MAX_DRAM_CHANNELS)
    mapping: str = knob("", "str", "address mapping, most significant field first (Ro row, Ra rank, Bg bank "
                        "group, Ba bank, Co column, Ch channel), e.g. RoBaRaCoCh (Bg left out: just below Ba, as in "
                        "Ramulator); empty: the device's default")
    page_policy: str = knob("open", "choice", "row buffer after a column command: open, closed (precharge "
                            "unless a queued access hits it) or adaptive (precharge when another row of the "
                            "bank waits)", choices=("open", "closed", "adaptive"))
    scheduler: str = knob("frfcfs", "choice", "controller scheduler: frfcfs (first-ready, then oldest; Rixner "
                          "2000) or fcfs", choices=("frfcfs", "fcfs"))
    row_hit_cap: int = knob(4, "int", "row hits a bank serves in a row while another row of it waits "
                            "(DRAMsim3's limit)", maximum=MAX_WIDTH)
    placement: str = knob("bump", "choice", "where dram.model: banks puts the buffers of a plan without a DRAM "
                          "layout: bump (one after another, 64 B aligned), pages (each on a row boundary of "
                          "every bank, consecutive buffers starting in different banks) or rows (bump, but no "
                          "buffer crosses more row boundaries than its size needs, and buffers moved in the same "
                          "step start in far-apart banks)",
                          choices=("bump", "pages", "rows"))
    read_queue: int = knob(32, "int", "read queue entries per channel", maximum=MAX_DRAM_QUEUE)
    write_queue: int = knob(32, "int", "write queue entries per channel; writes drain from 0.8 full to 0.2, and "
                            "a store is done once its writes are in it (posted)", maximum=MAX_DRAM_QUEUE)
    bank_queue: int = knob(0, "int", "0: the scheduler sees the read/write queues whole (Ramulator 2's "
                           "GenericDDR; the structure validated against it); > 0: per-bank command queues of "
                           "this depth behind them, which then hold transactions (DRAMsim3's PER_BANK)",
                           minimum=0, maximum=MAX_BANK_QUEUE)
    powerdown_after: float = knob(0.0, "time", "idle time after which a rank of dram.model: banks enters "
                                  "power-down (active if a row is open, else precharged: the device's IDD3P / "
                                  "IDD2P instead of IDD3N / IDD2N), its next access waiting tXP to exit; it wakes for "
                                  "each refresh (tRFC) and sleeps again after it; e.g. "
                                  "100ns; 0: never (the ranks stay powered up)")


@dataclass(frozen=True)
class EnergyConfig:
    """Energy table. Per-byte costs and per-access (per-op, per-descriptor) costs are kept apart;
    fields left unset (None) are derived from the components (``npusim.hw.silicon``)."""

    source: str = knob("Horowitz ISSCC 2014 (45 nm); LPDDR4 per Accelergy/CACTI", "str",
                       "where the figures come from")
    mac_int8: float = knob(0.23, "energy", "one 8-bit multiply-accumulate (0.2 pJ mult + 0.03 pJ add)")
    mac_fp16: float = knob(1.5, "energy", "one fp16 multiply-accumulate (1.1 pJ mult + 0.4 pJ add)")
    mac_fp32: float = knob(4.6, "energy", "one fp32 multiply-accumulate (3.7 pJ mult + 0.9 pJ add)")
    vector_op: float = knob(0.1, "energy", "one element-wise operation of the vector unit")
    stationary_register_access: float = knob(0.0, "energy", "one access of a PE's stationary-operand register "
                                             "file (cores.stationary_register)")
    accumulator_register_access: float = knob(0.0, "energy", "one access of a PE's partial-sum register "
                                              "(cores.accumulator_register)")
    scratchpad_read_byte: float | None = knob(None, "energy", "reading one scratchpad byte; default: a bank's "
                                              "read energy per access (CACTI table) / its port bytes")
    scratchpad_write_byte: float | None = knob(None, "energy", "writing one scratchpad byte; default: from the "
                                               "CACTI table as reads")
    dram_read_byte: float = knob(64.0, "energy", "reading one byte from DRAM, charged on the bytes the bus "
                                 "carries (whole bursts)")
    dram_write_byte: float = knob(64.0, "energy", "writing one byte to DRAM, charged on the bytes the bus carries")
    dma_descriptor: float = knob(50.0, "energy", "processing one DMA descriptor (a transfer may need several)")
    scratchpad_leakage: float | None = knob(None, "power", "leakage of the whole scratchpad; default: banks x "
                                            "a bank's leakage from the CACTI table")
    pe_leakage: float = knob(0.0107e-3, "power", "leakage of one PE (multiplier, accumulator adder, pipeline "
                             "registers)")
    vector_lane_leakage: float = knob(0.0073e-3, "power", "leakage of one vector-unit lane")
    uncore_static_power: float = knob(0.0, "power", "static power of everything else: DMA engine, command "
                                      "queues, interconnect, clock tree, DRAM PHY")
    static_power: float | None = knob(None, "power", "static power of the whole chip; when set, replaces the "
                                      "sum of the components above")

    def mac(self, dtype: str) -> float:
        """pJ per MAC of ``dtype``: fp16 for 2-byte floats, fp32 for wider, int8 otherwise."""
        if dtype in ("fp32", "float32", "float", "fp64", "float64"):
            return self.mac_fp32
        if dtype in ("fp16", "float16", "bf16", "bfloat16"):
            return self.mac_fp16
        return self.mac_int8


@dataclass(frozen=True)
class AreaConfig:
    """Silicon area by component (``npusim.hw.silicon.area_mm2``); unset fields are derived."""

    pe: float = knob(636e-6, "area", "one PE: multiplier, accumulator adder and pipeline registers")
    vector_lane: float = knob(419e-6, "area", "one vector-unit lane")
    register_bit: float = knob(4.52e-6, "area", "one bit of a PE register file (a flip-flop)")
    scratchpad: float | None = knob(None, "area", "the whole scratchpad; default: banks x a bank's area from "
                                    "the CACTI table")
    uncore: float = knob(0.0, "area", "everything else: DMA engine, command queues, interconnect, DRAM PHY")


@dataclass(frozen=True)
class Hardware:
    name: str = knob("custom", "str", "name of the configuration")
    description: str = knob("", "str", "one line about what it models")
    technology: str = knob("45nm", "choice", "process node of the CACTI SRAM table (the shipped compute energy "
                           "and area figures are 45 nm too); for another node, set every figure",
                           choices=("45nm",))
    clock: float = knob(1e9, "frequency", "clock of cores, scratchpad and DMA engine (at least 1 kHz: times are "
                        "doubles in ns, and below it a long run's lose the resolution DRAM refresh needs)",
                        minimum=1e3)
    streams: int = knob(1, "int", "hardware streams (command queues); stream i runs on core i mod count",
                        maximum=MAX_STREAMS)
    cores: CoreConfig = field(default_factory=CoreConfig, metadata={"doc": "the cores"})
    scratchpad: ScratchpadConfig = field(default_factory=ScratchpadConfig, metadata={"doc": "on-chip memory"})
    dma: DmaConfig = field(default_factory=DmaConfig, metadata={"doc": "the DMA engine"})
    dram: DramConfig = field(default_factory=DramConfig, metadata={"doc": "off-chip memory"})
    energy: EnergyConfig = field(default_factory=EnergyConfig, metadata={"doc": "energy table"})
    area: AreaConfig = field(default_factory=AreaConfig, metadata={"doc": "silicon area"})

    # Derived quantities used by the simulator (cycles are core clock cycles).
    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram.bandwidth / self.clock

    @property
    def dram_latency_cycles(self) -> float:
        return self.dram.latency * self.clock

    def with_scratchpad_size(self, size: int) -> "Hardware":
        """The same hardware with another scratchpad size (how --budget and DSE sweeps apply)."""
        return replace(self, scratchpad=replace(self.scratchpad, size=int(size)))
