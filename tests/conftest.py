"""Shared pytest configuration: hypothesis profiles.

`default` drops hypothesis's per-example deadline (timings on shared CI machines
are noisy, and a slow example is not a wrong one) and explores: fresh random
examples on every run, failures remembered in the local example database (said
explicitly: hypothesis's own default derandomizes when it detects a CI).  `ci` is
derandomized: every run draws the same examples (a seed derived from each test),
with no example database, so a CI result is reproducible and a red build is not a
lucky draw; it prints the reproduction blob of a failing example, to replay it
locally with `@reproduce_failure`.  Exploration happens locally (and in tests that
seed rounds of their own, see `test_reliability`).  `ci` is loaded when the
environment variable `CI` is set.

The suite runs on two workers (`-n 2`, pytest-xdist; CI has two cores): each test
module goes whole to one worker (module-scoped fixtures such as `both_layouts` are
set up once), and everything that starts Spark (tests taking the `spark` session
fixture, the `test_spark*` modules that run Spark in subprocesses, notebook 08)
goes to one worker as one unit, so one Spark session serves the run and no two JVMs
compete (`pytest_xdist_make_scheduler` below).  `-n 0` runs it in one process.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", deadline=None, derandomize=False)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True,
                          database=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")


import pytest  # noqa: E402


@pytest.fixture(scope="module", params=["rows", "columns", "columns-keyreads"])
def both_layouts(request):
    """Run a module in each layout: batches always in rows; always in columns where
    the data is plain (`ddflow.columnar`, threshold 0); and in columns with the
    columnar readers off (`reduce_chain.set_chain_columns(False)`: the chain kernel
    reads key by key, decoding batches; `join.set_join_columns(False)`: a join pairs
    each delta with the columnar batches and sums the pairs by a dict;
    `wcoj.half_join.set_half_join_columns(False)`: a half join reads its index key by
    key); the reduce
    adds its pending times one by one in rows and grouped by time in the column
    layouts (`Reduce.bulk_pending_from`), so the law, batching and agreement tests
    check every path.  Module-scoped, so hypothesis tests see no function-scoped
    fixture."""
    from ddflow.columnar import set_columnar_min
    from operators.join import set_join_columns
    from operators.reduce import Reduce
    from operators.reduce_chain import set_chain_columns
    from operators.wcoj.half_join import set_half_join_columns
    old = set_columnar_min(None if request.param == "rows" else 0)
    old_reads = set_chain_columns(request.param != "columns-keyreads")
    old_join = set_join_columns(request.param != "columns-keyreads")
    old_half = set_half_join_columns(request.param != "columns-keyreads")
    old_bulk = Reduce.bulk_pending_from
    Reduce.bulk_pending_from = 10**9 if request.param == "rows" else 0
    yield request.param
    set_columnar_min(old)
    set_chain_columns(old_reads)
    set_join_columns(old_join)
    set_half_join_columns(old_half)
    Reduce.bulk_pending_from = old_bulk


@pytest.fixture(scope="module", params=["paths", "edges"])
def both_trackers(request):
    """Run a module with each progress tracker (`ddflow.engine.plan.set_tracking`):
    path summaries between all pairs of places, and changes pushed edge by edge
    (module-scoped, so hypothesis tests see no function-scoped fixture)."""
    from ddflow.engine.plan import set_tracking
    old = set_tracking(request.param)
    yield request.param
    set_tracking(old)


def _scope(nodeid: str) -> str:
    """The unit a worker takes whole: `spark` for everything that starts Spark (a
    test id naming it: the `test_spark*` modules, engine contracts run on Spark,
    notebook 08), else the test's module."""
    return "spark" if "spark" in nodeid.lower() else nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Units of `_scope` instead of xdist's modules: one worker holds the one Spark
    session of a run.  (xdist's own module and file schedulers are made the same
    way, by a subclass choosing the scope.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SparkApart(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return SparkApart(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that takes the Spark session must say so in its id, or `_scope` would
    let a second worker start a second session."""
    wrong = [item.nodeid for item in items
             if "spark" in getattr(item, "fixturenames", ()) and _scope(item.nodeid) != "spark"]
    if wrong:
        raise pytest.UsageError(f"tests taking the `spark` fixture must name Spark in their id "
                                f"(tests/conftest.py `_scope`): {wrong}")
