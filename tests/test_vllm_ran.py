"""The check that vLLM's tests ran: a run that collected vllm tests and skipped them all fails
where vLLM is installed, and passes otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

SUITE = '''
import pytest

@pytest.mark.vllm
def test_needs_vllm():
    {body}

@pytest.mark.vllm
def test_needs_vllm_too():
    pytest.skip("vLLM did not start")

def test_plain():
    pass
'''


def run(tmp_path, *, installed: bool, body: str, checked: bool = True, args: tuple[str, ...] = ()):
    """pytest over SUITE in a folder of its own, vllm_ran told whether vLLM is installed."""
    hook = f"import vllm_ran\nvllm_ran.vllm_installed = lambda: {installed}\nfrom vllm_ran import pytest_configure\n"
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n" + (hook if checked else "")
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    vllm: runs the real vLLM\n")
    (tmp_path / "test_suite.py").write_text(SUITE.format(body=body))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=tmp_path, capture_output=True, text=True
    )


SKIPPED = 'pytest.skip("vLLM is not importable")'


def test_all_vllm_tests_skipped_fails_where_vllm_is_installed(tmp_path):
    result = run(tmp_path, installed=True, body=SKIPPED)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "spectui: vLLM is installed here, but all 2 vllm tests collected were skipped" in result.stdout
    # the same run without the check: it passes quietly, which is what the check is for
    assert run(tmp_path, installed=True, body=SKIPPED, checked=False).returncode == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("installed", "body", "args"),
    [
        (True, "pass", ()),  # one vLLM test ran
        (True, SKIPPED, ("-m", "not vllm")),  # deselected: nothing was asked of vLLM
        (False, SKIPPED, ()),  # not installed here: skipping is the right answer
    ],
)
def test_other_runs_pass(tmp_path, installed, body, args):
    result = run(tmp_path, installed=installed, body=body, args=args)
    assert result.returncode == pytest.ExitCode.OK, result.stdout
    assert "vllm tests collected were skipped" not in result.stdout
