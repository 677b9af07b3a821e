"""Engines schedule operators and move batches along edges.

`LocalEngine` runs everything in one process, optionally as W simulated workers with
an exchange by key hash; the Spark engine runs the same operators on shards held in
Spark partitions.
"""
