"""Circuits of stream operators: builder, streams, scheduler and runtime handles (`dbsp-paper.txt` §2)."""

from dbspark.circuit.circuit import Circuit, Feedback, Node
from dbspark.circuit.runtime import Runtime
from dbspark.circuit.stream import Stream

__all__ = ["Circuit", "Feedback", "Node", "Runtime", "Stream"]
