"""Operators: engine-agnostic state machines, one module per operator family.

Each operator receives batches of `(data, time, diff)` updates and input frontiers,
owns its traces, and emits output batches; it never asks which engine runs it.  The
family modules keep their incremental law in their docstring:

* `operators.linear`: the operator of a change is the change of the output.
* `operators.join`: bilinear; output time is the lattice join, diffs multiply.
* `operators.reduce`: output changes only at the join-closure of input times.
* `operators.iterate`: the fixpoint law (feedback one round later).
"""
