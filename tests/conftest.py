"""Shared pytest configuration: hypothesis profiles.

`default` drops hypothesis's per-example deadline (timings on shared CI machines
are noisy, and a slow example is not a wrong one); `ci` is the same and prints the
reproduction blob of a failing example, so a CI failure can be replayed locally
with `@reproduce_failure`.  `ci` is loaded when the environment variable `CI` is set.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
