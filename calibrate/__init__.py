"""Short real training runs through Ray, fitted into the simulator's step-time models."""
