"""hetune's discrete-event simulator of PBT on heterogeneous clusters.

Imports only the standard library, simpy, numpy and pandas: never torch or ray.
"""
