"""Worst-case optimal joins: delta queries (McSherry's dogsdogsdogs) and incremental Generic
Join (Völkel, "WCOJ meets DBSP").

Both evaluate a multi-way join variable by variable: a prefix of bound values is
extended by the atom that `count`s the fewest extensions, which `propose`s them,
and the other atoms `validate` (intersect) them.  They differ in how they are
incremental:

* `operators.wcoj.delta`: one update rule per atom, each a dataflow of half joins
  (`Count`, `Propose`, `Validate`) reading shared arrangements of the inputs at
  `AltNeu` times: state linear in the inputs, any lattice of times.  What every
  half join shares (waiting, compaction, the columnar bulk path) is
  `operators.wcoj.half_join`.
* `operators.wcoj.generic_join`: one operator, tick by tick (int times), the
  multi-way delta formula over each relation's `Δ` and accumulated state (`z1`).

The accumulation law for both: `acc(Q(R_0, ..), t) = Q(acc(R_0, t), ..)`,
`Q` the join with multiplicities multiplied.  `ddflow.query` parses rules and wires
either of them, or a plan of binary joins, from a rule's text.
"""

from operators.wcoj.delta import (Count, Delay, HalfJoin, Propose, RulePlan, Stamp, Validate,
                                  delta_plan)
from operators.wcoj.generic_join import GenericJoin, generic_plan

__all__ = ["HalfJoin", "Count", "Propose", "Validate", "Stamp", "Delay", "RulePlan",
           "delta_plan", "GenericJoin", "generic_plan"]
