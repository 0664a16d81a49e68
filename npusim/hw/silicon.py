"""Figures derived from the components: scratchpad energy per byte, static power and area.

Every figure a config leaves unset (None) is computed here from the parts it describes; a
config may set any of them instead (``energy.scratchpad_read_byte``, ``energy.scratchpad_leakage``,
``energy.static_power``, ``area.scratchpad``).

Scratchpad (``scratchpad_macro``): ``banks`` SRAM macros, each of ``size / banks`` bytes with a
port of ``bytes_per_cycle / banks`` bytes, of flavour ``scratchpad.cell``, figures from the
CACTI 7 table (``npusim.hw.sram_table``):

    read (write) energy per byte = a bank's read (write) energy per access / its port bytes
    leakage = banks x a bank's leakage            area = banks x a bank's area

Static power (``static_power_w``), W:

    scratchpad = energy.scratchpad_leakage, else the CACTI leakage above
    cores      = count x (PEs x energy.pe_leakage + vector_lanes x energy.vector_lane_leakage + its local
                 levels' leakage: instances x (leakage, else the CACTI leakage from 1 KiB, else 0)),
                 each core charged only while it computes when cores.power_gating is true
                 (PEs: pe_rows x pe_cols, or the product of cores.unroll)
    uncore     = energy.uncore_static_power (DMA, queues, interconnect, clock tree, DRAM PHY)

When ``energy.static_power`` is set it is the whole chip's figure: it is charged as ``uncore``
and the scratchpad and cores add nothing of their own (how configs worked before components).

Area (``area_mm2``), mm^2:

    array          = count x PEs x area.pe
    register_files = count x pe_rows x pe_cols x 8 x (stationary_register + accumulator_register) x area.register_bit
    local_levels   = count x sum over cores.levels of instances x (area, else the CACTI area of its size and
                     port_bits from 1 KiB, else size x 8 x area.register_bit)
    vector         = count x vector_lanes x area.vector_lane
    scratchpad     = area.scratchpad, else the CACTI area above
    uncore         = area.uncore
"""

from __future__ import annotations

from npusim.hw.config import CACTI_MIN_BYTES, Hardware, LocalLevel
from npusim.hw.sram_table import MIN_WIDTH, Macro, sram_macro
from npusim.util.units import format_bytes

STATIC_PARTS = ("scratchpad", "cores", "uncore")
AREA_PARTS = ("array", "register_files", "local_levels", "vector", "scratchpad", "uncore")


def _bank(hw: Hardware) -> tuple[int, int]:
    """(bytes per bank, port bits per bank) of the scratchpad."""
    sp = hw.scratchpad
    banks = max(sp.banks, 1)
    return max(sp.size // banks, 1), max(8 * sp.bytes_per_cycle // banks, 8)


def extrapolated_scratchpad(hw: Hardware) -> str | None:
    """What is extrapolated below the CACTI table's smallest macro (a scratchpad bank under
    ``CACTI_MIN_BYTES``) and not given in the config, said in words; None when nothing is."""
    size, _ = _bank(hw)
    e, a = hw.energy, hw.area
    missing = [name for name, value in (("energy.scratchpad_read_byte", e.scratchpad_read_byte),
                                        ("energy.scratchpad_write_byte", e.scratchpad_write_byte),
                                        ("energy.scratchpad_leakage", e.scratchpad_leakage),
                                        ("area.scratchpad", a.scratchpad)) if value is None]
    if size >= CACTI_MIN_BYTES or not missing:
        return None
    return (f"scratchpad banks of {size:,} B are below the CACTI table's smallest macro ({CACTI_MIN_BYTES:,} B): "
            f"their figures are extrapolated; give {', '.join(missing)} to use your own")


def scratchpad_macro(hw: Hardware) -> Macro:
    """The CACTI figures of one scratchpad bank."""
    size, port_bits = _bank(hw)
    return sram_macro(size, port_bits, hw.scratchpad.cell)


def scratchpad_byte_energy(hw: Hardware) -> tuple[float, float]:
    """(read, write) pJ per scratchpad byte: the config's figures, else from the CACTI table.

    A port narrower than the table's narrowest macro (32 bit) is that macro: an access still
    costs the 32-bit access, so its energy is shared by the bytes the port delivers."""
    e = hw.energy
    if e.scratchpad_read_byte is not None and e.scratchpad_write_byte is not None:
        return e.scratchpad_read_byte, e.scratchpad_write_byte
    macro = scratchpad_macro(hw)
    _, port_bits = _bank(hw)
    port_bytes = max(port_bits, MIN_WIDTH) / 8
    read = e.scratchpad_read_byte if e.scratchpad_read_byte is not None else macro.read_pj / port_bytes
    write = e.scratchpad_write_byte if e.scratchpad_write_byte is not None else macro.write_pj / port_bytes
    return read, write


def level_figures(hw: Hardware, level: LocalLevel) -> Macro:
    """One instance of a local level (``cores.levels``): pJ per read and write of ``port_bits``,
    leakage (W) and area (mm^2) — the config's figures, else the CACTI table for a macro of its
    size and port width (1 KiB and up; ``npusim.hw.sram_table``), else no leakage and
    ``size × 8 × area.register_bit`` (a register file of flip-flops)."""
    macro = sram_macro(level.size, level.port_bits, level.cell) if level.size >= CACTI_MIN_BYTES else None
    read = level.read_energy if level.read_energy is not None else macro.read_pj
    write = level.write_energy if level.write_energy is not None else macro.write_pj
    leakage = level.leakage if level.leakage is not None else (macro.leakage_w if macro else 0.0)
    area = level.area if level.area is not None else (macro.area_mm2 if macro else
                                                      level.size * 8 * hw.area.register_bit)
    return Macro(read, write, leakage, area)


def levels_leakage_w(hw: Hardware) -> float:
    """Leakage of one core's local levels (W): instances x each level's ``level_figures``."""
    c = hw.cores
    return sum(c.instances(lv) * level_figures(hw, lv).leakage_w for lv in c.levels)


def levels_area_mm2(hw: Hardware) -> dict[str, float]:
    """Area of each local level over every core (mm^2)."""
    c = hw.cores
    return {lv.name: c.count * c.instances(lv) * level_figures(hw, lv).area_mm2 for lv in c.levels}


def core_leakage_w(hw: Hardware) -> float:
    """Leakage of one core: its PEs, its vector lanes and its local levels (W,
    ``levels_leakage_w``)."""
    c, e = hw.cores, hw.energy
    return c.pes * e.pe_leakage + c.vector_lanes * e.vector_lane_leakage + levels_leakage_w(hw)


def static_power_w(hw: Hardware) -> dict[str, float]:
    """Static power by part (W) with every core leaking all the time (no power gating)."""
    e = hw.energy
    if e.static_power is not None:
        return {"scratchpad": 0.0, "cores": 0.0, "uncore": e.static_power}
    scratchpad = e.scratchpad_leakage
    if scratchpad is None:
        scratchpad = max(hw.scratchpad.banks, 1) * scratchpad_macro(hw).leakage_w
    return {"scratchpad": scratchpad, "cores": hw.cores.count * core_leakage_w(hw), "uncore": e.uncore_static_power}


def static_energy_pj(hw: Hardware, seconds: float, core_busy_seconds: tuple[float, ...]) -> dict[str, float]:
    """Static energy by part (pJ) of a run of ``seconds``; with ``cores.power_gating`` each core
    leaks only for its busy seconds (``core_busy_seconds``, one per core)."""
    power = static_power_w(hw)
    energy = {part: watts * seconds * 1e12 for part, watts in power.items()}
    if hw.cores.power_gating and hw.energy.static_power is None:
        energy["cores"] = core_leakage_w(hw) * sum(core_busy_seconds) * 1e12
    return energy


def area_mm2(hw: Hardware) -> dict[str, float]:
    """Silicon area by part (mm^2); ``local_levels``: the cores' ``cores.levels`` (by level:
    ``levels_area_mm2``), 0 without them."""
    c, a = hw.cores, hw.area
    pes = c.count * c.pes
    scratchpad = a.scratchpad
    if scratchpad is None:
        scratchpad = max(hw.scratchpad.banks, 1) * scratchpad_macro(hw).area_mm2
    return {
        "array": pes * a.pe,
        "register_files": pes * 8 * (c.stationary_register + c.accumulator_register) * a.register_bit,
        "local_levels": sum(levels_area_mm2(hw).values()),
        "vector": c.count * c.vector_lanes * a.vector_lane,
        "scratchpad": scratchpad,
        "uncore": a.uncore,
    }


def peak_dynamic_power_w(hw: Hardware, dtype: str = "int8") -> dict[str, float]:
    """Dynamic power (W) with every part at full rate: each PE a ``dtype`` MAC and each vector
    lane an op per cycle, the scratchpad moving ``bytes_per_cycle`` (reads), DRAM at its peak
    bandwidth (reads): an upper bound of what a run draws above static power."""
    c, e = hw.cores, hw.energy
    read, _ = scratchpad_byte_energy(hw)
    return {
        "array": c.count * c.pes * e.mac(dtype) * 1e-12 * hw.clock,
        "vector": c.count * c.vector_lanes * e.vector_op * 1e-12 * hw.clock,
        "scratchpad": hw.scratchpad.bytes_per_cycle * read * 1e-12 * hw.clock,
        "dram": hw.dram.bandwidth * e.dram_read_byte * 1e-12,
    }


def budget_text(hw: Hardware) -> str:
    """What ``npusim info --hw`` prints: area and power budget of a config, with the figures
    derived from the CACTI table."""
    bank, port = _bank(hw)
    read, write = scratchpad_byte_energy(hw)
    area, static = area_mm2(hw), static_power_w(hw)
    peak = peak_dynamic_power_w(hw)
    sp = hw.scratchpad
    device = _device_power(hw)
    if device is not None:  # (the part's currents, not energy.dram_read_byte; its idle draw beside the chip's)
        peak["dram"], static = device[0], {**static, "dram": device[1]}

    def parts(d: dict, scale: float, fmt: str, unit: str) -> str:
        listed = ", ".join(f"{k} {v * scale:{fmt}}" for k, v in d.items() if v)
        return f"   ({listed} {unit})" if listed else ""

    given = hw.energy.scratchpad_read_byte is not None and hw.energy.scratchpad_write_byte is not None
    flavour = "energy set by the config" if given else f"{sp.cell} SRAM (CACTI 7, {hw.technology})"
    gating = " (idle cores power-gated)" if hw.cores.power_gating else ""
    whole = " (energy.static_power: the whole chip)" if hw.energy.static_power is not None else ""
    return "\n".join([
        f"{hw.name}: {hw.technology}, {hw.clock / 1e6:,.0f} MHz",
        *_array_lines(hw),
        f"  area           {sum(area.values()):.2f} mm2{parts(area, 1, '.2f', 'mm2')}",
        f"  scratchpad     {format_bytes(sp.size)} in {sp.banks} banks of {format_bytes(bank)} x {port}-bit, "
        f"{flavour}: read {read:.3g} pJ/B, write {write:.3g} pJ/B",
        f"  static power   {sum(static.values()) * 1e3:,.1f} mW{parts(static, 1e3, ',.2f', 'mW')}{gating}{whole}",
        f"  peak dynamic   {sum(peak.values()):,.2f} W{parts(peak, 1, ',.2f', 'W')}   (int8 MACs, every part at full rate)",
        *_dram_lines(hw),
    ])


def _device_power(hw: Hardware) -> tuple[float, float] | None:
    """(peak, idle) W of the DRAM part when ``dram.model: banks`` times it (``device_power_w``), else None."""
    from npusim.dram.model import check_dram, device_power_w  # lazy: npusim.dram.model loads the C kernel

    if hw.dram.model != "banks" or check_dram(hw) is not None:
        return None
    return device_power_w(hw)


def _dram_lines(hw: Hardware) -> list[str]:
    """``budget_text``'s lines on the DRAM: the model in use, its bandwidth and latency, and the
    part ``dram.model: banks`` times (channels, rate, mapping, policy, command lengths)."""
    from npusim.dram.controller import timings  # lazy: npusim.dram sits above npusim.hw (and loads the C kernel)
    from npusim.dram.model import check_dram, controller_config  # lazy: as above

    d = hw.dram
    head = f"  dram           {d.bandwidth / 1e9:,.1f} GB/s, {d.latency * 1e9:,.0f} ns, dram.model: {d.model}"
    problem = check_dram(hw)
    if problem is not None:  # (only a run of dram.model: banks refuses it)
        field, value, expected = problem
        shown = (repr(value) if not isinstance(value, (int, float))  # (a mapping is text)
                 else f"{value / 1e9:g} GB/s" if field == "dram.bandwidth" else f"{value:g}")
        return [head, f"  dram part      {d.device}: dram.model: banks would refuse {field} = {shown}: {expected}"]
    cfg = controller_config(hw)
    dev, bus, t = cfg.device, cfg.device.command_bus, timings(cfg)
    buses = "row and column command buses" if bus.dual else "one command bus"
    ticks = "half-clock ticks" if bus.ticks_per_ck == 2 else "ticks"
    channels = f"{cfg.channels} channel{'s' if cfg.channels > 1 else ''}"
    ranks = f"{dev.ranks} stack IDs" if dev.stack_ids else f"{dev.ranks} rank{'s' if dev.ranks > 1 else ''}"
    return [
        head,
        f"  dram part      {dev.name} x {channels} at {cfg.rate:,.0f} MT/s, {format_bytes(dev.capacity * cfg.channels)}, "
        f"{dev.access_bytes} B accesses, {ranks} x {dev.banks} banks, {format_bytes(dev.page_bytes)} rows"
        + ("" if d.model == "banks" else "   (timed with dram.model: banks)"),
        *([f"                 dram.capacity {format_bytes(d.capacity)} is more: addresses past "
           f"{format_bytes(dev.capacity * cfg.channels)} wrap onto its rows"] if d.capacity > dev.capacity * cfg.channels
          else []),
        f"                 {cfg.mapping}, {cfg.policy} page, {cfg.scheduler}; {buses}: ACT {bus.act}, PRE {bus.pre}, "
        f"RD/WR {bus.cas} {ticks} of {t['tCMD']:.3g} ns",
    ]


def _array_lines(hw: Hardware) -> list[str]:
    """``budget_text``'s lines on the array and, for an unrolled core, each local level: its
    instances, what it holds, its size and port, its energy per access, leakage and area."""
    c = hw.cores
    if not c.unroll:
        return [f"  array          {c.count} x {c.pe_rows} x {c.pe_cols} PEs, {c.dataflow}"]
    unroll = " x ".join(f"{d}{u}" for d, u in c.unroll)
    systolic = f", systolic along {', '.join(c.systolic)}" if c.systolic else ""
    lines = [f"  array          {c.count} x {c.pes} PEs unrolling {unroll}{systolic}"]
    for lv in c.levels:
        fig = level_figures(hw, lv)
        shared = "the array" if lv.shared_over is None else (", ".join(lv.shared_over) or "nothing")
        lines.append(f"  level {lv.name:<9}{c.instances(lv):>5} x {format_bytes(lv.size)} ({'/'.join(lv.operands)}, shared "
                     f"over {shared}), {lv.port_bits}-bit port: read {fig.read_pj:.3g} pJ, write {fig.write_pj:.3g} pJ, "
                     f"leakage {c.instances(lv) * fig.leakage_w * 1e3:.3g} mW, area {c.instances(lv) * fig.area_mm2:.3g} mm2")
    return lines
