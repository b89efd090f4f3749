"""What every test of the project shares: the one Hypothesis profile, and fixtures more than one folder uses."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, settings

# The project's tests draw the same examples on every run (a failure in CI reproduces locally) and
# never time an example: a loaded 2-core machine is as fair as an idle one. Tests that need fewer or
# more examples say only `@settings(max_examples=N)`, which inherits the rest from here.
PROFILE = "taskhub-conformance-tests"


def pytest_configure(config: pytest.Config) -> None:
    settings.register_profile(PROFILE, derandomize=True, deadline=None, database=None, print_blob=False,
                              suppress_health_check=list(HealthCheck))
    settings.load_profile(PROFILE)


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    """Runs blocking client calls (StartInstance waits for the first turn) beside the worker."""
    pool = ThreadPoolExecutor(max_workers=8)
    try:
        yield pool
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture
def quiet_logs() -> Iterator[None]:
    """The engine's and worker's warnings off for tests that provoke thousands of them on purpose."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
