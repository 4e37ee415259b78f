"""What a hostile or broken server (or a hostile option) can send, and what spectui makes of
it: one line that ends the reply (or the command), never a traceback, a hang or a heap spent.
Fake OpenAI-compatible servers on loopback (tests/fake_openai_server.py); issue 42, section 1.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fake_openai_server import FakeOpenAI, fake_server
from spectui.cli.app import app as cli
from spectui.core import json_text
from spectui.core.errors import ModelError, UsageError
from spectui.core.events import Control, GenerationParams
from spectui.engines.server.engine import ServerEngine
from spectui.measure.run import run_reply

PROMPT = [{"role": "user", "content": "hi"}]
NESTED = '{"a":' * 3000  # unclosed, as a probe sends it
NESTED_CLOSED = '{"a":' * 3000 + "1" + "}" * 3000


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line_error(result) -> str:
    """The error a command printed: one line, no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) >= 1
    return " ".join(result.stderr.split())


# --- JSON nested without end ----------------------------------------------------------------


@pytest.mark.parametrize("text", [NESTED, NESTED_CLOSED, "[" * 5000 + "]" * 5000], ids=["open", "closed", "lists"])
def test_json_from_outside_has_a_depth_limit(text):
    with pytest.raises(json.JSONDecodeError, match="nested"):
        json_text.loads(text)


def test_json_depth_counts_brackets_outside_strings_only():
    text = json.dumps({"text": "[" * 5000, "ids": [[1, 2], [3]]})
    assert json_text.loads(text)["ids"] == [[1, 2], [3]]
    assert json_text.loads("[" * 100 + "]" * 100) is not None  # the limit itself is fine


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "Infinity", "NaN"])
def test_json_finite_refuses_numbers_that_are_not(literal):
    with pytest.raises(json.JSONDecodeError, match="finite"):
        json_text.loads(f'{{"num_speculative_tokens": {literal}}}', finite=True)


def test_a_nested_stream_chunk_ends_the_reply_in_one_line():
    with fake_server(FakeOpenAI(events=[NESTED_CLOSED])) as url:
        reply = run_reply(ServerEngine(url), PROMPT, GenerationParams(max_tokens=16), Control(k=0))
    assert reply.done.finish_reason == "error"
    assert "not JSON" in reply.done.error and "\n" not in reply.done.error


def test_a_nested_model_list_is_one_line():
    with fake_server(FakeOpenAI(models_body=NESTED)) as url:
        with pytest.raises(UsageError, match="not JSON"):
            ServerEngine(url)
        result = invoke("generate", "hi", "--engine", "server", "--server", url)
    assert result.exit_code == 2
    assert "not JSON" in one_line_error(result)


def test_compare_with_a_nested_baseline_server_is_one_line():
    with fake_server() as url, fake_server(FakeOpenAI(models_body=NESTED)) as baseline:
        result = invoke("compare", "hi", "--table", "--engine", "server", "--server", url, "--baseline-server", baseline)
    assert result.exit_code == 2
    assert "not JSON" in one_line_error(result)


@pytest.mark.parametrize("command", [("generate", "hi"), ("serve", "--print")])
def test_a_nested_speculative_config_is_one_line(command):
    result = invoke(*command, "--engine", "vllm", "--speculative-config", NESTED)
    if command[0] == "serve":
        result = invoke(*command, "--speculative-config", NESTED)
    assert result.exit_code == 2
    assert "--speculative-config is not JSON: nested" in one_line_error(result)


def test_serve_print_refuses_a_number_that_is_not_finite():
    result = invoke("serve", "--print", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 1e400}')
    assert result.exit_code == 2
    assert "Infinity" not in result.stdout
    assert "1e400 is not a finite number" in one_line_error(result)


def test_a_nested_heads_json_is_a_model_error(tmp_path):
    from spectui.heads.store import CONFIG_FILE, read_config

    (tmp_path / CONFIG_FILE).write_text(NESTED_CLOSED)
    with pytest.raises(ModelError, match="nested"):
        read_config(tmp_path)
