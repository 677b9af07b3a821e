"""Tools for testing incremental programs: hypothesis strategies and the law's oracle.

Strategies for times (`times`, `antichains`) and update batches (`updates`,
`keyed_updates`), random operator chains (`pipelines`, `build_pipeline`), and `check_law`, which checks an operator's output against the
plain function at every time of the join-closure of the times involved: the
accumulation law every ddflow operator answers to.
"""

from ddflow.testing.times import (TIME_KINDS, antichains, grid, minimum_of,
                                  nonempty_antichains, times)
from ddflow.testing.updates import keyed_updates, updates
from ddflow.testing.oracle import accumulate_all, check_law, join_closure
from ddflow.testing.harness import evaluate
from ddflow.testing.pipelines import (DAG_STEPS, REDUCE_BRANCH_STEPS, STEPS, build_pipeline,
                                     dags, pipelines)

__all__ = [
    "TIME_KINDS", "times", "grid", "minimum_of", "antichains", "nonempty_antichains",
    "updates", "keyed_updates", "check_law", "join_closure", "accumulate_all", "evaluate",
    "STEPS", "DAG_STEPS", "REDUCE_BRANCH_STEPS", "pipelines", "dags", "build_pipeline",
]
