"""Convert every ONNX model of a directory into a native trace in ``traces/``.

Usage::

    python scripts/import_models.py [MODELS_DIR] [--out traces] [--dtype int8]

MODELS_DIR defaults to ``../shared/models`` beside the repository. Each ``<model>.onnx``
becomes ``<out>/<model>.json``, or ``<out>/<model>.json.gz`` when the JSON would exceed 1 MB
(the other variant is removed, so exactly one trace per model remains). A summary table
(ops, tensors, activation and weight bytes, MACs) is printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npusim.errors import NpusimError
from npusim.graph.onnx_import import FLOAT_DTYPES, import_onnx
from npusim.graph.trace_io import save_trace

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = REPO.parent / "shared" / "models"
DEFAULT_OUT = REPO / "traces"
GZIP_ABOVE_BYTES = 1_000_000  # 1 MB: bigger traces are shipped gzipped


def write_trace(graph, out_dir: Path) -> Path:
    """Save ``graph`` as ``<name>.json``, or ``<name>.json.gz`` if the JSON exceeds 1 MB."""
    plain = out_dir / f"{graph.name}.json"
    gzipped = out_dir / f"{graph.name}.json.gz"
    save_trace(graph, plain)
    if plain.stat().st_size <= GZIP_ABOVE_BYTES:
        gzipped.unlink(missing_ok=True)
        return plain
    save_trace(graph, gzipped)
    plain.unlink()
    return gzipped


def import_models(models_dir: Path, out_dir: Path, dtype: str = "int8") -> list[dict]:
    """Import every ``*.onnx`` in ``models_dir``; return one summary row per model."""
    models = sorted(models_dir.glob("*.onnx"))
    if not models:
        raise NpusimError(f"{models_dir}: no .onnx models found")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in models:
        graph = import_onnx(model, dtype=dtype)
        trace = write_trace(graph, out_dir)
        rows.append({
            "model": graph.name,
            "ops": graph.n_ops,
            "tensors": graph.n_tensors,
            "activation_bytes": graph.bytes_of(("input", "activation", "output")),
            "weight_bytes": graph.bytes_of(("weight",)),
            "gmacs": sum(op.macs for op in graph.ops) / 1e9,
            "trace": trace.name,
            "trace_bytes": trace.stat().st_size,
        })
    return rows


def print_table(rows: list[dict]) -> None:
    header = f"{'model':<16} {'ops':>5} {'tensors':>7} {'act bytes':>12} {'weight bytes':>12} {'GMACs':>8}  trace"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['model']:<16} {r['ops']:>5} {r['tensors']:>7} {r['activation_bytes']:>12,} "
              f"{r['weight_bytes']:>12,} {r['gmacs']:>8.3f}  {r['trace']} ({r['trace_bytes']:,} B)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models_dir", nargs="?", type=Path, default=DEFAULT_MODELS,
                        help=f"directory of .onnx models (default: {DEFAULT_MODELS})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})")
    parser.add_argument("--dtype", default="int8", choices=sorted(FLOAT_DTYPES),
                        help="element type given to float tensors (default: int8)")
    args = parser.parse_args(argv)
    try:
        rows = import_models(args.models_dir, args.out, args.dtype)
    except NpusimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
