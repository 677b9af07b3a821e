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
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", deadline=None, derandomize=False)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True,
                          database=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")
