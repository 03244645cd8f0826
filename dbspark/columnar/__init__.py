"""Engine-neutral columnar semantics that both engines share (Polars, Arrow and NumPy; no engine imports).

`rows`: what a user pushes (tuples, dicts, frames) as a checked, typed Z-set frame, and the kind checks
of bag and set tables; `coerce`: values coerced to a column's type as a SQL INSERT does (DuckDB's rules).
The local engine runs them directly; the Spark engine runs them on rows pushed from Python and follows
the same rules in its own Column expressions for Spark DataFrames.
"""
