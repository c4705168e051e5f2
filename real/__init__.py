"""Real runs: torch models, Ray Tune PBT runs, event recording."""
