"""One local[2] SparkSession for the whole test run (startup costs ~5-10 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from ddflow.engine.spark import make_session
    session = make_session("local[2]", app="ddflow-tests")
    try:
        yield session
    finally:
        session.stop()
