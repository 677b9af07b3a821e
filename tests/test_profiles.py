"""The hypothesis profiles do what tests/conftest.py says they do."""

from __future__ import annotations

import os

from hypothesis import given, settings, strategies as st

import tests.conftest as conftest


def test_the_ci_profile_is_derandomized_and_the_default_explores():
    ci, default = settings.get_profile("ci"), settings.get_profile("default")
    assert ci.derandomize and ci.database is None and ci.print_blob
    assert not default.derandomize
    assert ci.deadline is None and default.deadline is None
    assert "derandomized" in conftest.__doc__ and "explores" in conftest.__doc__
    loaded = "ci" if os.environ.get("CI") else "default"
    assert settings.default.derandomize == settings.get_profile(loaded).derandomize


def _draws() -> list:
    seen: list = []

    @settings(settings.get_profile("ci"), max_examples=5)
    @given(st.integers())
    def probe(x):
        seen.append(x)
    probe()
    return seen


def test_the_ci_profile_draws_the_same_examples_every_run():
    assert _draws() == _draws()
