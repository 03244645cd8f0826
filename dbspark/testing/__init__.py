"""Test helpers: hypothesis strategies (`strategies`, `queries`) and stream oracles (`oracle`)."""
