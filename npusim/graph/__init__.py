"""Graphs: the model, trace I/O, ONNX import and analyses."""

from npusim.graph.model import TENSOR_KINDS, Gemm, Graph, Op, Tensor, build_graph
from npusim.graph.ops.kinds import GEMM_KINDS

__all__ = ["GEMM_KINDS", "TENSOR_KINDS", "Gemm", "Graph", "Op", "Tensor", "build_graph"]
