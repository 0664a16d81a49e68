"""Off-chip (DRAM) arena of the Tile-Aware Allocator against Shared Objects (the TAA paper's
Tables 1-2, measured here), its Numba kernel against the Python reference, and its time as
the number of tiles grows.

    python benchmarks/bench_taa.py [--hw edge-npu] [--budget 256KiB] [--sorts size] [--no-scaling] [TRACE ...]

Allocation time is dominated by tiles of thousands of chunks (channel-major row and column
tiles): the kernel shifts by skips its lattice search finds (``planners.offchip.collision``),
``--search-nodes 0`` measures the chunk sweep alone (same arenas).

1. Per trace: plan ``tile+default+arena+belady`` at the budget, derive the DRAM buffers and
   tile lifetimes of the plan (``planners.offchip.lifetimes``), and lay out the arena (weights
   excluded) with TAA (best of ``--sorts``), the best of the three Shared Objects strategies,
   the generic offset assignment and no reuse; allocation times exclude planning. Change =
   TAA / best Shared Objects - 1.
2. Numba vs Python: TensorAllocate (Algorithm 1 with CollisionSize and memoised RenderChunks)
   on every tensor of a synthetic tiled chain, kernel vs pure-Python reference, same answers.
   Tiles have 256 chunks (a row tile of a 256-channel feature map, typical mid-network; the
   traces' tiles have up to ~3,000): measured 81x here; at 64 chunks the kernel's fixed
   per-call cost dominates (18x), at 512 chunks 144x.
3. Scaling: TAA time on synthetic chains of 1k to 100k tiles.
"""

from __future__ import annotations

import argparse

import numpy as np

from npusim.errors import NpusimError
from npusim.hw.loader import load_hardware
from planners.offchip.collision import SEARCH_NODES, ChunkPatterns, Tile, TileArrays, tensor_allocate_reference
from npusim.plan.bound import as_bound
from npusim.registry import make_plan
from npusim.util.resources import list_resources
from npusim.util.units import parse_size
from npusim.workflow import load_graph
from planners.offchip import baselines
from planners.offchip.lifetimes import Buffer, dram_buffers
from planners.offchip.taa import taa
from timing import best_of


def trace_buffers(name: str, hw, budget: int):
    graph = load_graph(name)
    plan = make_plan(graph, hw, "tile+default+arena+belady", budget=budget)
    tiled = as_bound(plan, graph).bound_graph
    align = hw.dma.burst_bytes
    buffers = dram_buffers(tiled, plan.order, plan.transfers, None, graph, align)
    return [b for b in buffers if not b.weight], align


def chain(layers: int, tiles: int, channels: int = 16, height: int = 64, width: int = 64) -> list[Buffer]:
    """A chain of CHW feature maps, each written and read in ``tiles`` row tiles (one chunk per
    channel): layer l's tile k is written at time l*T + k and read (with the next tile, a halo)
    by layer l+1's tile k and k-1."""
    rows = height // tiles
    strides = (height * width, width, 1)
    out = []
    for layer in range(layers):
        ts = [Tile((channels, rows, width), strides, k * rows * width, 1,
                   layer * tiles + k, (layer + 1) * tiles + min(k + 1, tiles - 1)) for k in range(tiles)]
        out.append(Buffer(f"fm{layer}", channels * height * width, False, ts))
    return out


def section_traces(names, hw, budget, sorts, search_nodes=SEARCH_NODES):
    print(f"## Off-chip arena per trace ({hw.name}, budget {budget:,} B, TAA sorts {','.join(sorts)})\n")
    print("| trace | buffers | tiles | TAA B | best SO B | change | offsets B | naive B | TAA ms | SO ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    changes = []
    taa(chain(2, 4), 64)  # load the compiled kernels before timing
    for name in names:
        try:
            buffers, align = trace_buffers(name, hw, budget)
        except NpusimError as exc:
            print(f"| {name} | infeasible: {str(exc)[:60]} |")
            continue
        best, seconds = None, 0.0
        for s in sorts:
            r = taa(buffers, align, s, search_nodes)
            seconds += r.seconds
            if best is None or r.total < best.total:
                best = r
        so = baselines.shared_objects_best(buffers, align)
        offs = baselines.offsets(buffers, align)
        naive = baselines.naive(buffers, align)
        change = best.total / so.total - 1
        changes.append(change)
        print(f"| {name} | {len(buffers)} | {sum(len(b.tiles) for b in buffers):,} | {best.total:,} | {so.total:,} "
              f"({so.algorithm}) | {change:+.1%} | {offs.total:,} | {naive.total:,} | {seconds * 1e3:,.0f} | "
              f"{so.seconds * 1e3:,.0f} |", flush=True)
    if changes:
        print(f"\nTAA vs best Shared Objects: mean {sum(changes) / len(changes):+.1%}, best {min(changes):+.1%}, "
              f"worst {max(changes):+.1%}\n")


def section_kernel(layers: int = 24, tiles: int = 8, channels: int = 256):
    """Both sides get the chunks rendered beforehand (the paper's memoised preparation step):
    the Numba side as pattern arrays, the Python side through the memoised reference."""
    buffers = chain(layers, tiles, channels=channels)
    patterns = ChunkPatterns()
    every = [t for b in buffers for t in b.tiles]
    arrays = TileArrays.build(every, [0] * len(every), patterns)
    patterns.arrays()
    for _ in range(3):  # load the compiled kernel and warm it up on the first pair of tensors
        arrays.allocate(patterns, np.arange(tiles, 2 * tiles), np.arange(tiles), 0, 64)

    def numba_run():
        addresses = []
        for k in range(len(buffers)):
            cand = np.arange(k * tiles, (k + 1) * tiles, dtype=np.int64)
            peers = np.arange(0, k * tiles, dtype=np.int64)
            peers = peers[np.argsort(arrays.first[peers], kind="stable")]
            addresses.append(arrays.allocate(patterns, cand, peers, 0, 64))
            arrays.base[cand] = addresses[-1]
        return addresses

    def python_run():
        placed: list[tuple[Tile, int]] = []
        addresses = []
        for b in buffers:
            addresses.append(tensor_allocate_reference(b.tiles, placed, 0, 64))
            placed += [(t, addresses[-1]) for t in b.tiles]
        return addresses

    numba_s, addresses = best_of(5, numba_run)
    python_s, reference = best_of(1, python_run)
    assert addresses == reference
    print(f"## TensorAllocate, Numba vs Python ({layers} tensors x {tiles} tiles of {channels} chunks, "
          "every earlier tensor a peer)\n")
    print(f"Numba {numba_s * 1e3:,.1f} ms, Python {python_s * 1e3:,.1f} ms: {python_s / numba_s:,.0f}x, "
          "same addresses\n")


def section_scaling(counts=(1_000, 3_000, 10_000, 30_000, 100_000), tiles: int = 32):
    print(f"## TAA time vs tiles (synthetic chains, {tiles} row tiles of 16 chunks per tensor)\n")
    print("| tiles | tensors | TAA s | arena B | naive B |")
    print("|---:|---:|---:|---:|---:|")
    taa(chain(2, tiles), 64)  # compile
    for n in counts:
        buffers = chain(n // tiles, tiles)
        r = taa(buffers, 64)
        print(f"| {n:,} | {len(buffers):,} | {r.seconds:.2f} | {r.total:,} | {sum(b.size for b in buffers):,} |",
              flush=True)
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", help="traces (default: every shipped trace)")
    ap.add_argument("--hw", default="edge-npu")
    ap.add_argument("--budget", default="256KiB")
    ap.add_argument("--sorts", default="size", help="TAA sort heuristics to try, best kept: size,lifetime,peers")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--search-nodes", type=int, default=SEARCH_NODES,
                    help="lattice search budget per collision check (0: chunk sweeps only, same arenas)")
    args = ap.parse_args()

    hw = load_hardware(args.hw)
    section_traces(args.traces or list_resources("traces"), hw, parse_size(args.budget), args.sorts.split(","),
                   args.search_nodes)
    section_kernel()
    if not args.no_scaling:
        section_scaling()


if __name__ == "__main__":
    main()
