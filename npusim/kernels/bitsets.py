"""Bitset kernels: rows of uint64 words, bit ``j`` of row ``i`` at word ``j >> 6``, bit ``j & 63``.

Used by the multi-stream safety analysis (``npusim.plan.safety``) for ancestor-node sets
(MindSpore paper, Appendix B: "a bitset-based implementation to perform the logical
operations during the graph traversal") and for the symmetric unsafe-pair matrix.

Every Numba kernel here has a pure-Python reference (``*_reference``) that the tests compare
it with; the references use Python integers as bitsets.
"""

from __future__ import annotations

import numba
import numpy as np


def n_words(n_bits: int) -> int:
    return max(1, -(-n_bits // 64))


@numba.njit(cache=True, inline="always")
def test_bit(bits, i, j):
    return ((bits[i, j >> 6] >> np.uint64(j & 63)) & np.uint64(1)) == np.uint64(1)


@numba.njit(cache=True, inline="always")
def set_bit(bits, i, j):
    bits[i, j >> 6] |= np.uint64(1) << np.uint64(j & 63)


@numba.njit(cache=True)
def ancestor_bitsets(parent_ptr, parent_idx, topo, n_nodes):
    """Row ``v``: every node with a directed path of length >= 1 to ``v``.

    ``topo`` is a topological order of the nodes; parents of ``v`` are
    ``parent_idx[parent_ptr[v]:parent_ptr[v+1]]``. anc[v] = OR over parents p of (anc[p] | {p}).
    """
    words = max(1, (n_nodes + 63) // 64)
    anc = np.zeros((n_nodes, words), dtype=np.uint64)
    for k in range(len(topo)):
        v = topo[k]
        for e in range(parent_ptr[v], parent_ptr[v + 1]):
            p = parent_idx[e]
            for w in range(words):
                anc[v, w] |= anc[p, w]
            anc[v, p >> 6] |= np.uint64(1) << np.uint64(p & 63)
    return anc


def ancestor_sets_reference(parents: list[list[int]], topo: list[int]) -> list[int]:
    """Pure-Python reference of ``ancestor_bitsets``: one Python int per node."""
    anc = [0] * len(parents)
    for v in topo:
        acc = 0
        for p in parents[v]:
            acc |= anc[p] | (1 << p)
        anc[v] = acc
    return anc


def rows_to_ints(bits: np.ndarray) -> list[int]:
    """Each row of a uint64 bitset matrix as a Python int (for comparisons with references)."""
    out = []
    for row in bits:
        value = 0
        for w, word in enumerate(row.tolist()):
            value |= int(word) << (64 * w)
        out.append(value)
    return out
