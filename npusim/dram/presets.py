"""DRAM device presets: organisation, timing and current figures of standard parts, each cited.

A preset describes **one channel** of a part as a memory controller sees it (its data bus,
ranks, bank groups, banks, rows, columns and burst length), its timing constraints and the
supply currents of its devices. ``dram.device`` names the preset, ``dram.channels`` how many
such channels the NPU has (``npusim.hw.config.DramConfig``); ``dram.bandwidth`` sets the data
rate of the pins (``DeviceTiming`` below keeps the preset's nanoseconds).

Sources (``S1`` ... in the comments beside each figure):

- **S1** DRAMSys, ``configs/memspec/JEDEC_8Gb_LPDDR4-3200_16bit.json`` (tukl-msd/DRAMSys,
  commit 2107966): JEDEC JESD209-4 timings in clock cycles of tCK = 0.625 ns, and the IDD
  currents of its three supplies (VDD1 1.8 V, VDD2 1.1 V, VDDQ 1.1 V).
- **S2** DRAMSys, ``configs/memspec/JEDEC_1Gbx16_LPDDR4-4266.json`` (same commit): JESD209-4
  timings at tCK = 0.469 ns for a 16 Gb x16 channel (131,072 rows).
- **S3** DRAMsim3, ``configs/DDR4_8Gb_x8_3200.ini`` (umd-memsys/DRAMsim3, commit 2981759):
  timings in cycles of tCK = 0.63 ns (0.625 ns for DDR4-3200) and per-device IDD currents at
  VDD 1.2 V; cross-checked against Ramulator 2, ``python/ramulator/dram/ddr4.py``
  (CMU-SAFARI/ramulator2, commit c5b1c3a) preset ``DDR4_3200AA`` (nCL = nRCD = nRP = 22,
  nRAS 52, nRC 74, nWR 24, nRTP 12, nCWL 16, nCCDS 4, nCCDL 8, nWTRS 4, nWTRL 12; x8:
  nRRDS 4, nRRDL 8, nFAW 34; 8 Gb: tRFC 350 ns; tREFI 7.8 us).
- **S4** Ramulator 2, ``python/ramulator/dram/lpddr5.py`` (commit c5b1c3a): preset
  ``LPDDR5_6400`` (JESD209-5B Tables 330-372, tCK = 1.25 ns, WCK:CK 4:1, bank-group mode)
  and org ``LPDDR5_8Gb_x16``; its secondary timings tRRD 5 ns, tFAW 20 ns, tRFCab (8 Gb)
  210 ns, tREFI 3906 ns.
- **S5** Ramulator 2, ``python/ramulator/dram/ddr5.py`` (commit c5b1c3a): preset
  ``DDR5_4800AN`` (tCK = 0.416 ns) and org ``DDR5_16Gb_x8``; tRRD_S 8 nCK, tRRD_L 12 nCK,
  tFAW max(32 nCK, 20 ns), tRFC1 (16 Gb) 295 ns, tREFI 3.9 us.
- **S6** DRAMsim3, ``configs/HBM2_8Gb_x128.ini`` (commit 2981759): legacy-mode 128-bit
  channel, BL4, tCK = 1 ns, and per-channel IDD currents at VDD 1.2 V.
- **S7** Ramulator 2, ``python/ramulator/dram/hbm3.py`` (commit c5b1c3a): preset
  ``HBM3_6400Mbps`` (JESD238 Table 4, tCK = 0.625 ns) and org ``HBM3_16Gb_8hi``; tRFCab for an
  8 Gb channel 350 ns.
- **S9** gem5, ``src/python/gem5/components/memory/dram_interfaces/lpddr5.py``
  (``LPDDR5_5500_1x16_BG_BL32``, "based on initial JEDEC specification"): tXP 7 ns.
- **S10** command/address bus occupancy per command, in clocks of the command bus (the
  ``command_bus`` of each preset, ``CommandBus``): LPDDR4 from DRAMSys
  ``src/libdram/dram/memspec/MemSpecLPDDR4.cpp`` (``commandLengthInCycles``: ACT 4, PRE 2,
  RD/WR 4, REF 2 -- JESD209-4's two-part commands, ACTIVATE-1 + ACTIVATE-2 and READ-1 +
  CAS-2, of two clocks each on the 6-bit SDR CA bus); DDR4 from JESD79-4 (every command one
  clock; Ramulator 2 ``ddr4.py`` lists no multi-cycle command); DDR5 from Ramulator 2
  ``ddr5.py`` ``command_cycles`` (ACT, RD, WR 2 clocks; PRE 1; JESD79-5's two-cycle
  commands); LPDDR5 from Ramulator 2 ``lpddr5.py`` (every command one clock on the DDR CA
  bus, an activation two commands, ACT-1 and ACT-2; with WCK always on, no CAS before a
  column command); HBM2 from Ramulator 2 ``hbm2.py`` (separate row and column command
  buses, ACT 2 clocks); HBM3 from Ramulator 2 ``hbm3.py`` (separate buses in half-clock
  ticks: ACT 1.5 clocks, PRE 0.5, a column command 1).
- **S8** supply voltages of the standards: LPDDR4X VDDQ 0.6 V (JESD209-4-1), LPDDR5 VDD2H
  1.05 V and VDDQ 0.5 V (JESD209-5), DDR5 VDD 1.1 V (JESD79-5), HBM3 VDD 1.1 V (JESD238).

Where no source gives a part's currents (LPDDR4X, LPDDR5, DDR5, HBM2E, HBM3) they are an
**assumption**, said so beside the figure: the predecessor's currents at the new voltages,
read/write currents scaled with the data rate (the same charge per bit moved).

The energies the model charges follow from the currents (``device_energy``; Micron TN-41-01,
as DRAMsim3 ``src/configuration.cc`` and DRAMPower compute them), per rank of
``devices`` devices and summed over the supplies (V, IDD):

    activation (ACT + PRE)  E_act = V x (IDD0 x tRC - IDD3N x tRAS - IDD2N x (tRC - tRAS))
    read burst              E_rd  = V x (IDD4R - IDD3N) x tBurst
    write burst             E_wr  = V x (IDD4W - IDD3N) x tBurst
    all-bank refresh        E_ref = V x (IDD5 - IDD3N) x tRFC
    background              P_act = V x IDD3N (a bank of the rank open), P_pre = V x IDD2N (all closed),
                            in power-down V x IDD3P (rows open) or V x IDD2P (all closed)

with tBurst = BL / data rate. A supply listed for the I/O (VDDQ) adds its read/write
currents, as DRAMPower's I/O model would with the datasheet's IDD4RQ/IDD4WQ.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Supply:
    """One supply rail of a device: its voltage and the datasheet currents (A)."""

    name: str
    volts: float
    idd0: float    # one bank activated and precharged every tRC
    idd2n: float   # precharged standby
    idd3n: float   # active standby (a bank open)
    idd4r: float   # burst reads
    idd4w: float   # burst writes
    idd5: float    # all-bank refresh, during tRFC
    idd2p: float   # precharge power-down
    idd3p: float   # active power-down


@dataclass(frozen=True)
class CommandBus:
    """The command/address (CA) bus of one channel: how long each command holds it, in ticks of
    ``tCK / ticks_per_ck`` (source S10 per preset). One command per tick at most, so a stream of
    row conflicts can be bound by its commands rather than its data: on LPDDR4 a conflict is
    PRE + ACT + RD = 2 + 4 + 4 = 10 clocks against its 8-clock burst. ``dual``: separate row
    (ACT, PRE) and column (RD, WR) buses, as HBM has. A command of several ticks holds them in a
    row, except a split ACT."""

    pre: int
    act: int
    cas: int
    ticks_per_ck: int = 1
    dual: bool = False
    split_act: bool = False   # the ACT is ``act`` one-tick commands (LPDDR5's ACT-1, ACT-2) others may go between


#: JESD79-4 (DDR4): every command one clock of one shared bus.
SINGLE_CYCLE = CommandBus(pre=1, act=1, cas=1)


@dataclass(frozen=True)
class DramDevice:
    """One channel of a DRAM standard part (module docstring). Times in ns."""

    name: str
    standard: str
    source: str
    data_rate: float          # nominal MT/s per pin
    bus_bits: int             # data bus width of one channel
    burst_length: int         # BL: beats per access
    ranks: int
    bankgroups: int           # 1: no bank groups
    banks_per_group: int
    rows: int
    page_bytes: int           # row buffer of a rank across the channel's bus (bytes of one row)
    devices: int              # devices per rank (bus_bits / device width)
    tCK: float                # clock of the command bus at the nominal rate
    tRCD: float
    tRP: float
    tRAS: float
    tRC: float
    tCL: float                # read latency (CAS to first data)
    tCWL: float               # write latency
    tRRD_S: float
    tRRD_L: float
    tFAW: float
    tCCD_S: float             # column to column, different bank group (or no groups)
    tCCD_L: float             # same bank group
    tWR: float
    tWTR_S: float
    tWTR_L: float
    tRTP: float
    tREFI: float
    tRFC: float
    tXP: float                # power-down exit
    supplies: tuple[Supply, ...] = field(default=())
    notes: str = ""
    command_bus: CommandBus = SINGLE_CYCLE
    tCCD_L_WR: float = 0.0    # write to write in one bank group where longer than tCCD_L (DDR5); 0: tCCD_L
    stack_ids: bool = False   # the ranks are HBM3 stack IDs: one activation window (tRRD_S, tFAW), refreshed together

    @property
    def banks(self) -> int:
        """Banks of one rank."""
        return self.bankgroups * self.banks_per_group

    @property
    def access_bytes(self) -> int:
        """Bytes one column access (one burst of BL beats) moves on the channel."""
        return self.bus_bits // 8 * self.burst_length

    @property
    def columns(self) -> int:
        """Column accesses per row."""
        return self.page_bytes // self.access_bytes

    @property
    def channel_bandwidth(self) -> float:
        """Peak B/s of one channel at the nominal data rate."""
        return self.data_rate * 1e6 * self.bus_bits / 8

    @property
    def capacity(self) -> int:
        """Bytes of one channel."""
        return self.ranks * self.banks * self.rows * self.page_bytes


def _ns(cycles: float, tck: float) -> float:
    return round(cycles * tck, 4)


_LPDDR4_SUPPLIES = (  # S1 mempowerspec (A): idd01/02/0ql, idd2n1/2/Q, idd3n1/2/Q, idd4r1/2/q, idd4w1/2/q, idd51/52/5q
    Supply("VDD1", 1.8, idd0=3.5e-3, idd2n=2.0e-3, idd3n=2.25e-3, idd4r=2.25e-3, idd4w=2.25e-3, idd5=10.0e-3,
           idd2p=1.2e-3, idd3p=1.2e-3),     # S1: idd2p1, idd3p1
    Supply("VDD2", 1.1, idd0=45.0e-3, idd2n=27.0e-3, idd3n=30.0e-3, idd4r=275.0e-3, idd4w=210.0e-3, idd5=90.0e-3,
           idd2p=3.0e-3, idd3p=9.0e-3),     # S1: idd2p2, idd3p2
    Supply("VDDQ", 1.1, idd0=0.75e-3, idd2n=0.75e-3, idd3n=0.75e-3, idd4r=150.0e-3, idd4w=55.0e-3, idd5=0.75e-3,
           idd2p=0.75e-3, idd3p=0.75e-3),   # S1: idd2pQ, idd3pQ
)


def _scaled(supplies, volts: dict, rw_scale: float = 1.0) -> tuple[Supply, ...]:
    """Supplies at other voltages (``volts`` by rail name) with read/write currents x ``rw_scale``."""
    out = []
    for s in supplies:
        out.append(Supply(s.name, volts.get(s.name, s.volts), s.idd0, s.idd2n, s.idd3n,
                          s.idd3n + (s.idd4r - s.idd3n) * rw_scale, s.idd3n + (s.idd4w - s.idd3n) * rw_scale,
                          s.idd5, s.idd2p, s.idd3p))
    return tuple(out)


_T1 = 0.625  # S1 tCK, ns
LPDDR4_3200 = DramDevice(
    name="lpddr4-3200", standard="LPDDR4", source="S1 (DRAMSys JEDEC_8Gb_LPDDR4-3200_16bit.json)",
    data_rate=3200, bus_bits=16, burst_length=16,   # S1: width 16, burstLength 16 (one x16 channel)
    ranks=1, bankgroups=1, banks_per_group=8,       # S1: nbrOfRanks 1, nbrOfBankGroups 1, nbrOfBanks 8
    rows=65536, page_bytes=2048, devices=1,         # S1: nbrOfRows 65536; 1024 columns x 16 bit = 2 KiB
    tCK=_T1,
    tRCD=_ns(29, _T1), tRP=_ns(29, _T1),            # S1: RCD 29, RPpb 29
    tRAS=_ns(68, _T1), tRC=_ns(97, _T1),            # S1: RAS 68, RCpb 97
    tCL=_ns(28, _T1), tCWL=_ns(14, _T1),            # S1: RL 28, WL 14
    tRRD_S=_ns(16, _T1), tRRD_L=_ns(16, _T1),       # S1: RRD 16 (no bank groups)
    tFAW=_ns(64, _T1),                              # S1: FAW 64
    tCCD_S=_ns(8, _T1), tCCD_L=_ns(8, _T1),         # S1: CCD 8 (= BL16 / 2)
    tWR=_ns(29, _T1), tWTR_S=_ns(16, _T1), tWTR_L=_ns(16, _T1),   # S1: WR 29, WTR 16
    tRTP=_ns(12, _T1),                              # S1: RTP 12
    tREFI=_ns(6246, _T1), tRFC=_ns(448, _T1),       # S1: REFI 6246, RFCab 448
    tXP=_ns(12, _T1),                               # S1: XP 12
    supplies=_LPDDR4_SUPPLIES,
    command_bus=CommandBus(pre=2, act=4, cas=4),   # S10: DRAMSys LPDDR4 ACT 4, PRE 2, RD/WR 4
)

_T2 = 0.469  # S2 tCK, ns
LPDDR4X_4266 = DramDevice(
    name="lpddr4x-4266", standard="LPDDR4X", source="S2 (DRAMSys JEDEC_1Gbx16_LPDDR4-4266.json), S8",
    data_rate=4266, bus_bits=16, burst_length=16,   # S2: width 16, burstLength 16
    ranks=1, bankgroups=1, banks_per_group=8,       # S2: 8 banks, no bank groups
    rows=131072, page_bytes=2048, devices=1,        # S2: nbrOfRows 131072 (16 Gb channel), 1024 columns x 16 bit
    tCK=_T2,
    tRCD=_ns(39, _T2), tRP=_ns(39, _T2),            # S2: RCD 39, RPpb 39
    tRAS=_ns(90, _T2), tRC=_ns(129, _T2),           # S2: RAS 90, RCpb 129
    tCL=_ns(36, _T2), tCWL=_ns(18, _T2),            # S2: RL 36, WL 18
    tRRD_S=_ns(22, _T2), tRRD_L=_ns(22, _T2),       # S2: RRD 22
    tFAW=_ns(86, _T2),                              # S2: FAW 86
    tCCD_S=_ns(8, _T2), tCCD_L=_ns(8, _T2),         # S2: CCD 8
    tWR=_ns(39, _T2), tWTR_S=_ns(22, _T2), tWTR_L=_ns(22, _T2),   # S2: WR 39, WTR 22
    tRTP=_ns(17, _T2),                              # S2: RTP 17
    tREFI=_ns(8341, _T2), tRFC=_ns(812, _T2),       # S2: REFI 8341, RFCab 812
    tXP=_ns(17, _T2),                               # S2: XP 17
    # assumption (S2 lists no currents): S1's LPDDR4 currents, VDDQ at LPDDR4X's 0.6 V (S8),
    # read/write currents x 4266/3200 (the same charge per bit at the higher rate)
    supplies=_scaled(_LPDDR4_SUPPLIES, {"VDDQ": 0.6}, 4266 / 3200),
    command_bus=CommandBus(pre=2, act=4, cas=4),   # S10: as LPDDR4 (JESD209-4-1 keeps its commands)
)

_T3 = 0.625  # DDR4-3200: S3 writes tCK = 0.63 ns; JEDEC's 3200 MT/s is 0.625 ns
DDR4_3200 = DramDevice(
    name="ddr4-3200", standard="DDR4", source="S3 (DRAMsim3 DDR4_8Gb_x8_3200.ini; Ramulator 2 DDR4_3200AA)",
    data_rate=3200, bus_bits=64, burst_length=8,    # S3: bus_width 64, BL 8 (64 B per access)
    ranks=1, bankgroups=4, banks_per_group=4,       # S3: bankgroups 4, banks_per_group 4
    rows=65536, page_bytes=8192, devices=8,         # S3: rows 65536, 1024 columns x 8 bit x 8 devices = 8 KiB
    tCK=_T3,
    tRCD=_ns(22, _T3), tRP=_ns(22, _T3),            # S3: tRCD 22, tRP 22
    tRAS=_ns(52, _T3), tRC=_ns(74, _T3),            # S3: tRAS 52; tRC = tRAS + tRP = 74 (Ramulator nRC 74)
    tCL=_ns(22, _T3), tCWL=_ns(16, _T3),            # S3: CL 22, CWL 16
    tRRD_S=_ns(4, _T3), tRRD_L=_ns(8, _T3),         # S3: tRRD_S 4, tRRD_L 8
    tFAW=_ns(34, _T3),                              # S3: tFAW 34
    tCCD_S=_ns(4, _T3), tCCD_L=_ns(8, _T3),         # S3: tCCD_S 4, tCCD_L 8
    tWR=_ns(24, _T3), tWTR_S=_ns(4, _T3), tWTR_L=_ns(12, _T3),    # S3: tWR 24, tWTR_S 4, tWTR_L 12
    tRTP=_ns(12, _T3),                              # S3: tRTP 12
    tREFI=_ns(12480, _T3), tRFC=_ns(560, _T3),      # S3: tREFI 12480, tRFC 560 (350 ns)
    tXP=_ns(10, _T3),                               # S3: tXP 10
    supplies=(  # S3 [power], mA per device: VDD 1.2, IDD0 57, IDD2N 37, IDD3N 52, IDD4R 168, IDD4W 150, IDD5AB 250
        Supply("VDD", 1.2, idd0=57e-3, idd2n=37e-3, idd3n=52e-3, idd4r=168e-3, idd4w=150e-3, idd5=250e-3,
               idd2p=25e-3, idd3p=43e-3),   # S3: IDD2P 25, IDD3P 43
    ),
    command_bus=SINGLE_CYCLE,                      # S10: JESD79-4, one clock per command
)

_T4 = 1.25  # S4 tCK (CK), ns
LPDDR5_6400 = DramDevice(
    name="lpddr5-6400", standard="LPDDR5", source="S4 (Ramulator 2 LPDDR5_6400, LPDDR5_8Gb_x16; JESD209-5B)",
    data_rate=6400, bus_bits=16, burst_length=16,   # S4: dq 16, BL16 (internal_prefetch_size 16)
    ranks=1, bankgroups=4, banks_per_group=4,       # S4: rank 1, bankgroup 4, bank 4 (BG mode)
    rows=32768, page_bytes=2048, devices=1,         # S4: row 1<<15, column 1<<10 (x16 at BL16: 2 KiB page in BG mode)
    tCK=_T4,
    tRCD=_ns(15, _T4), tRP=_ns(15, _T4),            # S4: nRCD 15, nRP 15
    tRAS=_ns(34, _T4), tRC=_ns(49, _T4),            # S4: nRAS 34, nRC 49
    tCL=_ns(17, _T4), tCWL=_ns(9, _T4),             # S4: nCL 17, nCWL 9
    tRRD_S=5.0, tRRD_L=5.0,                         # S4: tRRD_S = tRRD_L = 5 ns (_resolve_nRRDS/L)
    tFAW=20.0,                                      # S4: tFAW 20 ns in BG mode (_resolve_nFAW)
    tCCD_S=_ns(2, _T4), tCCD_L=_ns(4, _T4),         # S4: nCCDS 2, nCCDL 4
    tWR=_ns(28, _T4), tWTR_S=_ns(5, _T4), tWTR_L=_ns(10, _T4),    # S4: nWR 28, nWTRS 5, nWTRL 10
    tRTP=_ns(8, _T4),                               # S4: nRTP 8
    tREFI=3906.0, tRFC=210.0,                       # S4: tREFI 3906 ns, tRFCab (8 Gb) 210 ns
    tXP=7.0,                                        # S9: tXP "greater of 3 CK or 7 ns"
    # assumption (no source gives LPDDR5 currents): S1's LPDDR4 currents at LPDDR5's rails
    # (S8: VDD2H 1.05 V, VDDQ 0.5 V), read/write currents x 6400/3200
    supplies=_scaled(_LPDDR4_SUPPLIES, {"VDD2": 1.05, "VDDQ": 0.5}, 6400 / 3200),
    command_bus=CommandBus(pre=1, act=2, cas=1, split_act=True),   # S10: one clock each, ACT = ACT-1 + ACT-2
)

_T5 = 2000 / 4800  # S5 tCK = 0.4167 ns (Ramulator writes 416 ps)
DDR5_4800 = DramDevice(
    name="ddr5-4800", standard="DDR5", source="S5 (Ramulator 2 DDR5_4800AN, DDR5_16Gb_x8; JESD79-5)",
    data_rate=4800, bus_bits=32, burst_length=16,   # S5: channel_width 32 (a DIMM sub-channel), nBL 8 nCK = BL16
    ranks=1, bankgroups=8, banks_per_group=4,       # S5: bankgroup 8, bank 4
    rows=65536, page_bytes=4096, devices=4,         # S5: row 1<<16, column 1<<10 x 8 bit x 4 devices = 4 KiB
    tCK=round(_T5, 4),
    tRCD=_ns(34, _T5), tRP=_ns(34, _T5),            # S5: nRCD 34, nRP 34
    tRAS=_ns(77, _T5), tRC=_ns(111, _T5),           # S5: nRAS 77, nRC 111
    tCL=_ns(34, _T5), tCWL=_ns(32, _T5),            # S5: nCL 34, nCWL 32
    tRRD_S=_ns(8, _T5), tRRD_L=_ns(12, _T5),        # S5: nRRDS 8, nRRDL 12 (x8 at 4800)
    tFAW=_ns(48, _T5),                              # S5: max(32, ceil(20 ns / tCK)) = 48 nCK
    tCCD_S=_ns(8, _T5), tCCD_L=_ns(12, _T5),        # S5: nCCDS 8, nCCDL 12
    tCCD_L_WR=_ns(48, _T5),                         # S5: nCCDL_WR 48 (writes within a bank group)
    tWR=_ns(72, _T5), tWTR_S=_ns(6, _T5), tWTR_L=_ns(24, _T5),    # S5: nWR 72, nWTRS 6, nWTRL 24
    tRTP=_ns(18, _T5),                              # S5: nRTP 18
    tREFI=3900.0, tRFC=295.0,                       # S5: tREFI 3.9 us, tRFC1 (16 Gb) 295 ns
    tXP=7.5,                                        # assumption: S5 gives no tXP; 7.5 ns as DDR4's (S3) and LPDDR4's (S1)
    # assumption (no source gives DDR5 currents): S3's DDR4 currents at DDR5's VDD 1.1 V (S8),
    # read/write currents x 4800/3200
    supplies=(Supply("VDD", 1.1, idd0=57e-3, idd2n=37e-3, idd3n=52e-3, idd4r=52e-3 + 116e-3 * 1.5,
                     idd4w=52e-3 + 98e-3 * 1.5, idd5=250e-3, idd2p=25e-3, idd3p=43e-3),),
    command_bus=CommandBus(pre=1, act=2, cas=2),   # S10: Ramulator 2 DDR5 command_cycles
)

_T6 = 1.0  # S6 tCK, ns
_HBM2_SUPPLIES = (  # S6 [power], mA per 128-bit channel: VDD 1.2, IDD0 65, IDD2N 40, IDD3N 55, IDD4R 390, IDD4W 500, IDD5AB 250
    Supply("VDD", 1.2, idd0=65e-3, idd2n=40e-3, idd3n=55e-3, idd4r=390e-3, idd4w=500e-3, idd5=250e-3,
           idd2p=28e-3, idd3p=40e-3),       # S6: IDD2P 28, IDD3P 40
)
HBM2_2000 = DramDevice(
    name="hbm2-2000", standard="HBM2", source="S6 (DRAMsim3 HBM2_8Gb_x128.ini)",
    data_rate=2000, bus_bits=128, burst_length=4,   # S6: bus_width 128 (legacy mode), BL 4
    ranks=1, bankgroups=4, banks_per_group=4,       # S6: bankgroups 4, banks_per_group 4
    rows=32768, page_bytes=1024, devices=1,         # S6: rows 32768, 64 columns x 128 bit = 1 KiB
    tCK=_T6,
    tRCD=14.0, tRP=14.0,                            # S6: tRCDRD 14, tRP 14
    tRAS=34.0, tRC=48.0,                            # S6: tRAS 34; tRC = tRAS + tRP
    tCL=14.0, tCWL=4.0,                             # S6: CL 14, CWL 4
    tRRD_S=4.0, tRRD_L=6.0,                         # S6: tRRD_S 4, tRRD_L 6
    tFAW=30.0,                                      # S6: tFAW 30
    tCCD_S=2.0, tCCD_L=2.0,                         # S6: tCCD_S 1, tCCD_L 2, both at least the BL4 burst (2 nCK)
    tWR=16.0, tWTR_S=6.0, tWTR_L=8.0,               # S6: tWR 16, tWTR_S 6, tWTR_L 8
    tRTP=4.0,                                       # S6: tRTP_S 4 (tRTP_L 6 within a bank group: taken as 4)
    tREFI=3900.0, tRFC=260.0,                       # S6: tREFI 3900, tRFC 260
    tXP=8.0,                                        # S6: tXP 8
    supplies=_HBM2_SUPPLIES,
    command_bus=CommandBus(pre=1, act=2, cas=1, dual=True),   # S10: Ramulator 2 HBM2, row/column buses
)

_T7 = 0.625  # HBM2E at 3.2 Gb/s per pin
HBM2E_3200 = DramDevice(
    name="hbm2e-3200", standard="HBM2E",
    source="S6 at 3.2 Gb/s (assumption: HBM2E keeps HBM2's core timings in ns, as JESD235 speed bins do)",
    data_rate=3200, bus_bits=128, burst_length=4,   # S6 organisation (legacy 128-bit channel, BL4)
    ranks=1, bankgroups=4, banks_per_group=4, rows=32768, page_bytes=1024, devices=1,
    tCK=_T7,
    tRCD=14.0, tRP=14.0, tRAS=34.0, tRC=48.0,       # S6 in ns (assumption above)
    tCL=14.0, tCWL=4.0,
    tRRD_S=4.0, tRRD_L=6.0, tFAW=30.0,
    tCCD_S=1.25, tCCD_L=2.5,                        # 2 and 4 nCK at tCK 0.625 (S6's 1 and 2 nCK at least the burst)
    tWR=16.0, tWTR_S=6.0, tWTR_L=8.0, tRTP=4.0,
    tREFI=3900.0, tRFC=260.0, tXP=8.0,
    # assumption: S6's currents, read/write currents x 3200/2000
    supplies=_scaled(_HBM2_SUPPLIES, {}, 3200 / 2000),
    command_bus=CommandBus(pre=1, act=2, cas=1, dual=True),   # S10: as HBM2
)

_T8 = 0.625  # S7 tCK, ns
HBM3_6400 = DramDevice(
    name="hbm3-6400", standard="HBM3", source="S7 (Ramulator 2 HBM3_6400Mbps, HBM3_16Gb_8hi; JESD238)",
    data_rate=6400, bus_bits=32, burst_length=8,    # S7: pseudo channel dq 32, BL8 (nBL 2 nCK at 4 beats/CK)
    ranks=2, bankgroups=4, banks_per_group=4,       # S7: sid 2 (stack IDs taken as ranks), bankgroup 4, bank 4
    rows=16384, page_bytes=1024, devices=1,         # S7: row 1<<14, 256 column beats x 32 bit = 1 KiB
    tCK=_T8,
    tRCD=_ns(31, _T8), tRP=_ns(26, _T8),            # S7: nRCDRD 31, nRP 26
    tRAS=_ns(45, _T8), tRC=_ns(72, _T8),            # S7: nRAS 45, nRC 72
    tCL=_ns(20, _T8), tCWL=_ns(10, _T8),            # S7: nCL 20, nCWL 10
    tRRD_S=_ns(4, _T8), tRRD_L=_ns(5, _T8),         # S7: nRRDS 4, nRRDL 5
    tFAW=_ns(24, _T8),                              # S7: nFAW 24
    tCCD_S=_ns(2, _T8), tCCD_L=_ns(4, _T8),         # S7: nCCDS 2, nCCDL 4
    tWR=_ns(33, _T8), tWTR_S=_ns(7, _T8), tWTR_L=_ns(10, _T8),    # S7: nWR 33, nWTRS 7, nWTRL 10
    tRTP=_ns(9, _T8),                               # S7: nRTP 9
    tREFI=_ns(6240, _T8), tRFC=350.0,               # S7: nREFI 6240; tRFCab 350 ns (8 Gb channel)
    tXP=8.0,                                        # assumption: S7 gives no tXP; HBM2's 8 ns (S6)
    # assumption (no source gives HBM3 currents): S6's HBM2 currents per 128-bit channel, a
    # quarter per 32-bit pseudo channel, at HBM3's VDD 1.1 V (S8), read/write x 6400/2000
    supplies=(Supply("VDD", 1.1, idd0=65e-3 / 4, idd2n=40e-3 / 4, idd3n=55e-3 / 4,
                     idd4r=(55e-3 + 335e-3 * 3.2) / 4, idd4w=(55e-3 + 445e-3 * 3.2) / 4, idd5=250e-3 / 4,
                     idd2p=28e-3 / 4, idd3p=40e-3 / 4),),
    command_bus=CommandBus(pre=1, act=3, cas=2, ticks_per_ck=2, dual=True),  # S10: half-clock ticks
    stack_ids=True,                                 # S7: nRRDS, nFAW and REFab at the pseudo channel, over both SIDs
)

PRESETS: dict[str, DramDevice] = {d.name: d for d in (
    LPDDR4_3200, LPDDR4X_4266, LPDDR5_6400, DDR4_3200, DDR5_4800, HBM2_2000, HBM2E_3200, HBM3_6400)}

#: Address mapping a preset uses unless ``dram.mapping`` says otherwise (module
#: ``npusim.dram.mapping``): parts with bank groups interleave consecutive accesses over the
#: groups (tCCD_S instead of tCCD_L between them); all put channels in the lowest bits.
DEFAULT_MAPPING = {"LPDDR4": "RoRaBaCoCh", "LPDDR4X": "RoRaBaCoCh"}
GROUPED_MAPPING = "RoRaBaCoBgCh"


def default_mapping(device: DramDevice) -> str:
    return DEFAULT_MAPPING.get(device.standard, GROUPED_MAPPING if device.bankgroups > 1 else "RoRaBaCoCh")


@dataclass(frozen=True)
class DeviceEnergy:
    """Energies of one rank (pJ) and its background power (W); see the module docstring."""

    activate: float
    read: float
    write: float
    refresh: float
    active_standby: float
    precharged_standby: float
    active_powerdown: float
    precharged_powerdown: float


def part_label(device: str, channels: int, rate_mts: float | None) -> str:
    """``lpddr4-3200 x2``, with the pins' rate when ``dram.bandwidth`` runs them off the part's
    rating (``hbm2-2000 at 2,400 MT/s x32``): the report's ``DRAM rows`` line names what was timed."""
    rated = PRESETS[device].data_rate if device in PRESETS else None
    off = rate_mts and rated and abs(rate_mts / rated - 1) > 0.005
    return f"{device} at {rate_mts:,.0f} MT/s x{channels}" if off else f"{device} x{channels}"


def device_energy(device: DramDevice) -> DeviceEnergy:
    """Per-operation energies of one rank from the device's currents (module docstring)."""
    t_burst = device.burst_length / (device.data_rate * 1e-3)  # ns
    act = rd = wr = ref = p_act = p_pre = pd_act = pd_pre = 0.0
    for s in device.supplies:
        v = s.volts * device.devices
        act += v * (s.idd0 * device.tRC - s.idd3n * device.tRAS - s.idd2n * (device.tRC - device.tRAS))
        rd += v * (s.idd4r - s.idd3n) * t_burst
        wr += v * (s.idd4w - s.idd3n) * t_burst
        ref += v * (s.idd5 - s.idd3n) * device.tRFC
        p_act += v * s.idd3n
        p_pre += v * s.idd2n
        pd_act += v * s.idd3p
        pd_pre += v * s.idd2p
    # V x A x ns = nJ: x 1000 for pJ
    return DeviceEnergy(max(act, 0.0) * 1e3, max(rd, 0.0) * 1e3, max(wr, 0.0) * 1e3, max(ref, 0.0) * 1e3, p_act, p_pre,
                        pd_act, pd_pre)
