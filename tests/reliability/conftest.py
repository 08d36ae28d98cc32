"""The reliability tests' settings (from RELIABILITY_* environment variables) and their summary
lines, printed again at the end of the run whether or not pytest captured the output."""

from __future__ import annotations

import pytest

from tests.reliability.harness import SUMMARIES, Settings


@pytest.fixture(scope="session")
def reliability() -> Settings:
    return Settings.from_environment()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SUMMARIES:
        terminalreporter.section("reliability")
        for line in SUMMARIES:
            terminalreporter.write_line(line)
