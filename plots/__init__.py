"""Figures regenerated from result files only; never runs a simulation (no torch, no ray)."""
