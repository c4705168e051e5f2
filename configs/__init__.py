"""Shipped configs (package data): clusters/, calibration/, experiments/ and adapt/ TOML files."""
