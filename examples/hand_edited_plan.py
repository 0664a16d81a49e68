"""Simulate a hand-edited plan.

A planner's plan is plain JSON (``npusim plan ... -o plan.json``): tensors and ops by name,
residencies as (tensor, offset, first step, last step), transfers as (step, load/store,
tensor, cause). Here we plan a five-op chain whose skip tensor ``a`` must be spilled at
the tight budget M_R, then edit the JSON by hand the way a user would in an editor: give
the scratchpad 1 KiB more and keep ``a`` resident instead of spilling it. The validator
checks the edit without trusting whoever wrote it, and the simulator tells what it is
worth. A second edit makes two tensors overlap; the validator names the problem.

Run: python examples/hand_edited_plan.py   (the CLI equivalent: npusim plan / validate / simulate)
"""

import json
import tempfile
from pathlib import Path

from npusim import graph_from_records, load_hw, load_plan, plan_graph, save_plan, simulate_plan, validate


def chain_with_skip():
    """x -A-> a -B(w)-> b -C-> c -E-> e -D(a, e)-> y: tensor a lives across B, C and E. Held to
    the trace contract as a file is (graph_from_records); B and D are custom ops ("Scale",
    "Combine": no shape rule, their work given as vector_ops), their shapes no NumPy op's."""
    def tensor(name, n, kind="activation"):
        return dict(name=name, shape=[n], dtype="int8", itemsize=1, kind=kind)

    tensors = [tensor("x", 1000, "input"), tensor("w", 64, "weight"), tensor("a", 1000),
               tensor("b", 1000), tensor("c", 1000), tensor("e", 1000), tensor("y", 64, "output")]
    ops = [dict(name="A", kind="Relu", inputs=["x"], outputs=["a"], vector_ops=1000),
           dict(name="B", kind="Scale", inputs=["a", "w"], outputs=["b"], vector_ops=1000),
           dict(name="C", kind="Relu", inputs=["b"], outputs=["c"], vector_ops=1000),
           dict(name="E", kind="Relu", inputs=["c"], outputs=["e"], vector_ops=1000),
           dict(name="D", kind="Combine", inputs=["a", "e"], outputs=["y"], vector_ops=64)]
    return graph_from_records("chain_with_skip", tensors, ops)


def show(title, plan, hw):
    report = simulate_plan(plan, hw, source=title)  # a plan read from a file is bound to its graph
    ob = report.offchip_bytes
    print(f"{title}: budget {plan.capacity} B, {len(plan.residencies)} residencies, {len(plan.transfers)} transfers")
    print(f"  latency {report.cycles:,.0f} cycles, energy {report.total_energy_pj:,.1f} pJ, "
          f"off-chip {report.offchip_total_bytes:,} B (spill {ob['spill']}, retrieve {ob['retrieve']})")


graph, hw = chain_with_skip(), load_hw("edge-npu")
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "plan.json"

    # 1. A planner's plan at M_R = 2112 B: `a` is spilled after B and retrieved before D.
    save_plan(plan_graph(graph, hw, "default+arena+belady", budget=2112), path)
    show("planned", load_plan(path, graph), hw)

    # 2. Hand edit: 1 KiB more scratchpad, `a` stays at offset 2112 from step 0 to 4, no spill.
    data = json.loads(path.read_text())
    data["capacity"] = 2112 + 1024
    data["residencies"] = [r for r in data["residencies"] if r["tensor"] != "a"]
    data["residencies"].append({"tensor": "a", "offset": 2112, "first": 0, "last": 4})
    data["transfers"] = [t for t in data["transfers"] if t["cause"] not in ("spill", "retrieve")]
    data["meta"].update(planner="by hand", status="hand_written", solve_seconds=0.0)
    path.write_text(json.dumps(data, indent=1))
    edited = load_plan(path, graph)
    print(f"validator on the edit: {validate(edited) or 'valid'}")
    show("hand-edited", edited, hw)

    # 3. A bad edit: put `e` on top of `a`. The validator names op, tensors, steps and bytes.
    for r in data["residencies"]:
        if r["tensor"] == "e":
            r["offset"] = 2112
    path.write_text(json.dumps(data, indent=1))
    for violation in validate(load_plan(path, graph)):
        print(f"violation: {violation}")
