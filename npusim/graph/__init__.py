"""Graphs: the model, trace I/O, ONNX import and analyses."""

from npusim.graph.model import GEMM_KINDS, TENSOR_KINDS, Gemm, Graph, Op, Tensor, build_graph

__all__ = ["GEMM_KINDS", "TENSOR_KINDS", "Gemm", "Graph", "Op", "Tensor", "build_graph"]
