"""Fuzzing what a server sends: the SSE byte stream, the JSON chunks in it, and /metrics.

The server engine reads three things another process writes: a server-sent-events stream
(cut by the network at any byte, even inside a UTF-8 character), the `chat.completion.chunk`
JSON objects inside it, and a Prometheus text exposition. A server that drops, cuts or
garbles any of them must never crash the chat. The parsers may refuse input cleanly (an
error chunk, a `PrometheusFormatError`) but never raise an IndexError, KeyError, TypeError
or the like from inside; and what a well-behaved server writes must read back exactly,
however the bytes arrive.
"""

from __future__ import annotations

import json
import math
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.engines.server import transport
from spectui.engines.server.chunks import ChatChunk, parse_chunk
from spectui.engines.server.engine import ServerEngine
from spectui.engines.server.prometheus import (
    ACCEPTED_PER_POSITION,
    NUM_ACCEPTED_TOKENS,
    NUM_DRAFT_TOKENS,
    NUM_DRAFTS,
    PrometheusFormatError,
    Sample,
    SpecCounters,
    is_vllm_exposition,
    parse_samples,
    spec_counters,
)
from spectui.engines.server.sse import SseDecoder, iter_sse_data
from spectui.engines.server.transport import ServerError
from spectui.core.events import Control, Done, GenerationParams, Step

FUZZ = settings(max_examples=200, deadline=None)
SOME = settings(max_examples=100, deadline=None)

# Any character a server could encode (no lone surrogates: they have no UTF-8 form).
any_text = st.text(st.characters(codec="utf-8"), max_size=20)


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    """`raw` in pieces, cut at the given offsets (empty pieces included: read1 never gives
    one, but the decoder should not care)."""
    bounds = [0, *sorted(cuts), len(raw)]
    return [raw[start:end] for start, end in zip(bounds, bounds[1:])]


def cuts_in(size: int):
    return st.lists(st.integers(0, size), max_size=12)


# --- SSE -----------------------------------------------------------------------------------

# sse.py reads `\n` and `\r\n` line ends only, as its docstring says (vLLM writes `\n`);
# a bare `\r` is not a line end to it, so it is left out of the round trips here.
line_ends = st.sampled_from([b"\n", b"\r\n"])
line_text = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=20)
# Multi-byte characters, so that random cuts often fall inside one.
wide_text = st.text(st.sampled_from("aé日本🎉 :\x00\ufeff"), max_size=12)
field_value = st.one_of(line_text, wide_text)


@st.composite
def data_line(draw) -> tuple[bytes, str]:
    """One `data:` line and the value the standard says it carries."""
    value = draw(field_value)
    if value == "":
        spelled = draw(st.sampled_from(["data", "data:", "data: "]))  # no colon: empty value
    elif value.startswith(" "):
        spelled = "data: " + value  # only the first space after the colon is dropped
    else:
        spelled = draw(st.sampled_from(["data:", "data: "])) + value
    return spelled.encode(), value


@st.composite
def other_line(draw) -> bytes:
    """A line that carries no data: a comment, `event:`, `id:`, `retry:`, an unknown field."""
    field = draw(st.sampled_from(["", "event", "id", "retry", "x-unknown"]))
    separator = ":" if field == "" else draw(st.sampled_from([":", ": "]))
    return (field + separator + draw(field_value)).encode()


@st.composite
def sse_streams(draw) -> tuple[bytes, list[tuple[str, int]]]:
    """A valid SSE stream and its events: (data, offset just after its dispatching blank line)."""
    raw = b""
    events: list[tuple[str, int]] = []
    for _ in range(draw(st.integers(0, 5))):
        raw += b"".join(draw(st.lists(line_ends, max_size=2)))  # keep-alive blank lines
        values = []
        for is_data in draw(st.lists(st.booleans(), max_size=5)):
            if is_data:
                line, value = draw(data_line())
                values.append(value)
            else:
                line = draw(other_line())
            raw += line + draw(line_ends)
        raw += draw(line_ends)  # the blank line that ends the event
        if values:  # an event without data dispatches nothing
            events.append(("\n".join(values), len(raw)))
    return raw, events


def fed_whole(raw: bytes) -> list[str]:
    return list(iter_sse_data([raw]))


def fed_byte_by_byte(raw: bytes) -> list[str]:
    decoder = SseDecoder()
    return [event for i in range(len(raw)) for event in decoder.feed(raw[i : i + 1])]


# SSE-ish fragments, so that random bytes hold fields, line ends and half characters.
sse_fragments = st.lists(
    st.one_of(
        st.sampled_from([b"data:", b"data: ", b"event: x", b":", b"\n", b"\r", b"\r\n", b"[DONE]", b"\xe6\x97", b"\xa5"]),
        st.binary(max_size=8),
    ),
    max_size=30,
).map(b"".join)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), sse_fragments), data=st.data())
def test_sse_any_bytes_any_split_never_raise_and_agree(raw, data):
    # The decoder has no error type: whatever the bytes, it returns text (bad UTF-8
    # replaced), and the same text however the network split them.
    cuts = data.draw(cuts_in(len(raw)))
    whole = fed_whole(raw)
    assert list(iter_sse_data(split_at(raw, cuts))) == whole
    assert fed_byte_by_byte(raw) == whole
    for event in whole:
        assert isinstance(event, str)
        event.encode("utf-8")  # no lone surrogates leak out of the decoding


@FUZZ
@given(stream=sse_streams(), data=st.data())
def test_sse_round_trip_whatever_the_cuts(stream, data):
    raw, events = stream
    expected = [event for event, _ in events]
    cuts = data.draw(cuts_in(len(raw)))
    assert list(iter_sse_data(split_at(raw, cuts))) == expected
    # Every cut at once: this one always splits each multi-byte character.
    assert fed_byte_by_byte(raw) == expected


@FUZZ
@given(stream=sse_streams(), data=st.data())
def test_sse_stream_cut_off_gives_the_complete_events_only(stream, data):
    # A connection that dies at any byte yields the events whose blank line arrived, and no
    # half event: half a JSON chunk is no chunk.
    raw, events = stream
    end = data.draw(st.integers(0, len(raw)))
    cuts = data.draw(cuts_in(end))
    assert list(iter_sse_data(split_at(raw[:end], cuts))) == [event for event, at in events if at <= end]


@FUZZ
@given(
    stream=sse_streams(),
    done=st.sampled_from([b"data: [DONE]", b"data:[DONE]"]),
    ends=st.tuples(line_ends, line_ends),
    data=st.data(),
)
def test_sse_done_sentinel_arrives_last_and_whole(stream, done, ends, data):
    # sse.py knows no sentinel: `[DONE]` is a payload like any other, and the engine stops on
    # `data.strip() == "[DONE]"`. It must come out whole, last, wherever the stream was cut.
    raw, events = stream
    raw += done + ends[0] + ends[1]
    cuts = data.draw(cuts_in(len(raw)))
    decoded = list(iter_sse_data(split_at(raw, cuts)))
    assert decoded == [event for event, _ in events] + ["[DONE]"]


# --- Prometheus ------------------------------------------------------------------------------

metric_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,24}", fullmatch=True)
label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True)
# Label values may hold anything: quotes, backslashes, newlines, other Unicode line breaks.
label_values = st.one_of(any_text, st.text(st.sampled_from('a"\\\n\r{},= \u2028\x85'), max_size=10))
sample_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -math.inf, math.nan, -1.5e-3, 0.0, -0.0, 1.7959957862737482e09]),
)
timestamps = st.none() | st.integers(-(2**40), 2**53)


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def go_float(value: float) -> str:
    """How prometheus_client writes a value."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def sample_line(
    name: str, labels: dict[str, str], value: float, timestamp: int | None, trailing_comma: bool = False
) -> str:
    text = name
    if labels:
        pairs = ",".join(f'{key}="{escape_label(val)}"' for key, val in labels.items())
        text += "{" + pairs + ("," if trailing_comma else "") + "}"
    text += " " + go_float(value)
    if timestamp is not None:
        text += f" {timestamp}"
    return text


@st.composite
def families(draw, names=metric_names) -> tuple[list[str], list[Sample]]:
    """One metric family as exposition lines, with the samples those lines hold."""
    name = draw(names)
    lines = []
    if draw(st.booleans()):
        lines.append(f"# HELP {name} {escape_help(draw(any_text))}")
    if draw(st.booleans()):
        lines.append(f"# TYPE {name} {draw(st.sampled_from(['counter', 'gauge', 'histogram', 'summary', 'untyped']))}")
    samples = []
    for _ in range(draw(st.integers(0, 4))):
        sample_name = name + draw(st.sampled_from(["", "_total", "_created", "_bucket", "_count"]))
        labels = draw(st.dictionaries(label_names, label_values, max_size=4))
        value = draw(sample_values)
        lines.append(sample_line(sample_name, labels, value, draw(timestamps), draw(st.booleans())))
        samples.append(Sample(sample_name, labels, value))
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "# a plain comment", "#"])))
    return lines, samples


def comparable(samples: list[Sample]) -> list[tuple]:
    # repr: NaN equals NaN, -0.0 differs from 0.0, so equality is exact.
    return [(s.name, dict(s.labels), repr(s.value)) for s in samples]


def check_counters(samples: list[Sample]) -> None:
    """What the engine does with parsed samples must not raise either."""
    counters = spec_counters(samples)
    assert counters is None or isinstance(counters, SpecCounters)
    if counters is not None:
        counters.as_stats()
        (counters - counters).as_stats()
    is_vllm_exposition(samples)


# Prometheus-ish fragments among random text, so the label walker sees its own syntax.
prometheus_fragments = st.lists(
    st.one_of(
        any_text,
        st.sampled_from(["{", "}", '"', "=", ",", " ", "\n", "\\", "#", "NaN", "+Inf", "1e3", "position", '"0"', "x\u2028"]),
        st.sampled_from([NUM_DRAFTS, NUM_DRAFT_TOKENS, NUM_ACCEPTED_TOKENS, ACCEPTED_PER_POSITION]),
    ),
    max_size=30,
).map("".join)


@FUZZ
@given(text=st.one_of(st.text(), prometheus_fragments))
def test_prometheus_any_text_parses_or_refuses_cleanly(text):
    try:
        samples = parse_samples(text)
    except PrometheusFormatError as error:
        assert str(error).startswith("line ")
        return
    assert all(isinstance(sample, Sample) and isinstance(sample.value, float) for sample in samples)
    check_counters(samples)


@FUZZ
@given(family_list=st.lists(families(), max_size=5), line_end=st.sampled_from(["\n", "\r\n"]))
def test_prometheus_round_trip(family_list, line_end):
    lines = [line for family_lines, _ in family_list for line in family_lines]
    text = "".join(line + line_end for line in lines)
    expected = [sample for _, samples in family_list for sample in samples]
    assert comparable(parse_samples(text)) == comparable(expected)


counts = st.integers(0, 10**6).map(float)


@st.composite
def vllm_spec_series(draw) -> tuple[list[str], SpecCounters]:
    """vLLM's spec_decode counters for one to three engines, with `_created` twins."""
    k = draw(st.integers(0, 6))
    totals = {NUM_DRAFTS: 0, NUM_DRAFT_TOKENS: 0, NUM_ACCEPTED_TOKENS: 0}
    per_position = [0] * k
    lines = []
    for engine in range(draw(st.integers(1, 3))):
        labels = {"engine": str(engine), "model_name": draw(label_values)}
        for name in totals:
            value = draw(counts)
            totals[name] += int(value)
            lines.append(f"# TYPE {name} counter")
            lines.append(sample_line(name, labels, value, draw(timestamps)))
            created = name.removesuffix("_total") + "_created"
            lines.append(sample_line(created, labels, 1.7959957862737482e09, None))
        for position in draw(st.permutations(range(k))):
            value = draw(counts)
            per_position[position] += int(value)
            # The labels in any order: `position` need not come last.
            position_labels = dict(draw(st.permutations([*labels.items(), ("position", str(position))])))
            lines.append(sample_line(ACCEPTED_PER_POSITION, position_labels, value, None))
    expected = SpecCounters(
        totals[NUM_DRAFTS], totals[NUM_DRAFT_TOKENS], totals[NUM_ACCEPTED_TOKENS], tuple(per_position)
    )
    return lines, expected


COUNTED = {NUM_DRAFTS, NUM_DRAFT_TOKENS, NUM_ACCEPTED_TOKENS, ACCEPTED_PER_POSITION}
other_names = metric_names.filter(lambda name: name not in COUNTED)


@SOME
@given(vllm=vllm_spec_series(), others=st.lists(families(other_names), max_size=5), data=st.data())
def test_vllm_spec_counters_found_among_other_families(vllm, others, data):
    vllm_lines, expected = vllm
    blocks = [vllm_lines] + [lines for lines, _ in others]
    blocks = data.draw(st.permutations(blocks))
    text = "\n".join(line for block in blocks for line in block) + "\n"
    samples = parse_samples(text)
    assert spec_counters(samples) == expected
    assert is_vllm_exposition(samples)
    # Without vLLM's series the same text has no counters.
    assert spec_counters(parse_samples("\n".join(line for lines, _ in others for line in lines))) is None


hostile_values = st.one_of(sample_values, counts, st.just(1e308))  # two 1e308 sum to inf
positions = st.one_of(
    st.integers(-3, 8).map(str), any_text, st.sampled_from(["1e9", "99999999999", "+1", " 2", "²", "٣", "1_0"])
)
total_lines = st.builds(
    lambda name, value: sample_line(name, {"engine": "0"}, value, None),
    st.sampled_from([NUM_DRAFTS, NUM_DRAFT_TOKENS, NUM_ACCEPTED_TOKENS]),
    hostile_values,
)
position_lines = st.builds(
    lambda position, value: sample_line(ACCEPTED_PER_POSITION, {"position": position}, value, None),
    positions,
    hostile_values,
)
# Well-formed vLLM lines whose values (NaN, ±Inf, 1e308) or positions ("x", "1e9") are no counts.
hostile_expositions = st.lists(st.one_of(total_lines, position_lines), min_size=1, max_size=8).map("\n".join)


@FUZZ
@given(text=hostile_expositions)
def test_spec_counters_survive_hostile_values_and_positions(text):
    # The engine calls spec_counters outside its PrometheusFormatError guard, so it must not
    # raise, and a huge position must not build a huge tuple.
    samples = parse_samples(text)
    check_counters(samples)
    counters = spec_counters(samples)
    assert counters is None or counters.num_positions <= 1024


# --- chat chunks ---------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(allow_nan=False), st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=10,
)


def right_or_wrong(right):
    """The shape vLLM sends, or any JSON value in its place (scalars often: 1 where a dict goes)."""
    return st.one_of(right, json_scalars, json_values)


token_ids = st.lists(st.integers(0, 200_000), max_size=6)
deltas = st.fixed_dictionaries(
    {},
    optional={key: right_or_wrong(st.text(max_size=8)) for key in ("role", "content", "reasoning", "reasoning_content")},
)
choices = st.fixed_dictionaries(
    {},
    optional={
        "index": right_or_wrong(st.just(0)),
        "delta": right_or_wrong(deltas),
        "token_ids": right_or_wrong(token_ids),
        "finish_reason": right_or_wrong(st.sampled_from([None, "stop", "length", "abort"])),
    },
)
records = st.fixed_dictionaries(
    {},
    optional={
        "per_step_accepted": right_or_wrong(st.lists(st.integers(0, 4), max_size=4)),
        "per_step_drafted": right_or_wrong(st.lists(st.integers(0, 4), max_size=4)),
        "num_spec_steps": right_or_wrong(st.integers(0, 4)),
        "num_spec_tokens": right_or_wrong(st.integers(0, 8)),
    },
)
chunk_objects = st.fixed_dictionaries(
    {},
    optional={
        "object": right_or_wrong(st.sampled_from(["chat.completion.chunk", "error"])),
        "choices": right_or_wrong(st.lists(right_or_wrong(choices), max_size=2)),
        "prompt_token_ids": right_or_wrong(token_ids),
        "metrics": right_or_wrong(st.fixed_dictionaries({}, optional={"speculative_decoding": right_or_wrong(records)})),
        "usage": right_or_wrong(st.fixed_dictionaries({}, optional={"completion_tokens": right_or_wrong(st.integers(0, 99))})),
        "error": right_or_wrong(st.fixed_dictionaries({}, optional={"message": right_or_wrong(st.text(max_size=8))})),
    },
)
malformed_chunks = st.one_of(chunk_objects, json_values).map(json.dumps)


def well_typed(chunk: ChatChunk) -> bool:
    """The fields as the engine uses them; an error chunk needs only its message."""
    if chunk.error is not None:
        return isinstance(chunk.error, str)
    ids_ok = all(isinstance(i, int) for i in chunk.token_ids) and isinstance(chunk.token_ids, tuple)
    prompt_ok = chunk.prompt_token_ids is None or all(isinstance(i, int) for i in chunk.prompt_token_ids)
    return (
        ids_ok
        and prompt_ok
        and isinstance(chunk.text, str)
        and (chunk.finish_reason is None or isinstance(chunk.finish_reason, str))
        and (chunk.speculative_decoding is None or isinstance(chunk.speculative_decoding, dict))
        and (chunk.usage is None or isinstance(chunk.usage, dict))
    )


@settings(FUZZ, report_multiple_bugs=False)
@given(data=malformed_chunks)
def test_parse_chunk_refuses_or_skips_malformed_json(data):
    chunk = parse_chunk(data)
    assert isinstance(chunk, ChatChunk) and well_typed(chunk)


@SOME
@given(data=st.one_of(any_text, st.binary(max_size=40).map(lambda b: b.decode("utf-8", "replace"))))
def test_parse_chunk_of_non_json_is_an_error_chunk(data):
    try:
        json.loads(data)
    except ValueError:
        assert parse_chunk(data).error.startswith("the server sent a chunk that is not JSON")
    else:
        chunk = parse_chunk(data)  # JSON after all (a number, a string): refused or read
        assert isinstance(chunk, ChatChunk) and well_typed(chunk)


# --- the whole stream, through the engine ----------------------------------------------------------

METRICS = "\n".join(
    [f'{name}{{engine="0"}} 0.0' for name in (NUM_DRAFTS, NUM_DRAFT_TOKENS, NUM_ACCEPTED_TOKENS)]
    + [f'{ACCEPTED_PER_POSITION}{{engine="0",position="{i}"}} 0.0' for i in range(4)]
).encode()


class FakeTransport:
    """transport's network calls answered from memory: the engine's own code runs on them."""

    def __init__(self, body: list[bytes], metrics: bytes = METRICS) -> None:
        self.body = body
        self.metrics = metrics

    def get(self, address, path, api_key, *, timeout, abort=None):
        if path == "/metrics":
            return self.metrics
        raise ServerError(f"no {path}")

    def get_json(self, address, path, api_key, *, timeout):
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": "model"}]}
        raise ServerError(f"no {path}")

    def open_stream(self, *args, **kwargs):
        return FakeStream(self.body)


class FakeStream:
    """transport.Stream's interface over canned byte chunks."""

    def __init__(self, body: list[bytes]) -> None:
        self.body = body

    def chunks(self):
        yield from self.body

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def run_stream(body: list[bytes], metrics: bytes = METRICS) -> list:
    fake = FakeTransport(body, metrics)
    with mock.patch.multiple(
        transport, get=fake.get, get_json=fake.get_json, open_stream=fake.open_stream
    ):
        engine = ServerEngine("http://fake:8000")
        # max_tokens above any reply drawn here: the client's own limit has tests of its own.
        return list(engine.stream([{"role": "user", "content": "hi"}], GenerationParams(max_tokens=1000), Control()))


def assert_one_clean_done(events: list) -> Done:
    *steps, done = events
    assert all(isinstance(step, Step) for step in steps)
    assert isinstance(done, Done)
    assert done.error is None or "\n" not in done.error
    return done


def sse(payloads: list[str]) -> bytes:
    return b"".join(f"data: {payload}\n\n".encode() for payload in payloads)


@SOME
@given(raw=st.one_of(st.binary(max_size=200), sse_fragments), data=st.data())
def test_engine_survives_any_bytes(raw, data):
    events = run_stream(split_at(raw, data.draw(cuts_in(len(raw)))))
    assert_one_clean_done(events)


@SOME
@given(
    ids=st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=5), max_size=6),
    after=st.one_of(st.binary(max_size=40), malformed_chunks.map(lambda c: sse([c]))),
    data=st.data(),
)
def test_engine_stops_at_done_whatever_follows(ids, after, data):
    # The steps before `[DONE]` are the reply; whatever follows is never read.
    chunks = [json.dumps({"choices": [{"delta": {"content": "x" * len(step)}, "token_ids": step}]}) for step in ids]
    raw = sse([*chunks, "[DONE]"]) + after
    events = run_stream(split_at(raw, data.draw(cuts_in(len(raw)))))
    done = assert_one_clean_done(events)
    assert done.finish_reason == "stop" and done.error is None
    assert [list(step.token_ids) for step in events[:-1]] == ids


# The last chunk of a reply as vLLM shapes it, its record and usage garbled.
usage_chunks = st.fixed_dictionaries(
    {"choices": st.just([])},
    optional={
        "usage": right_or_wrong(st.fixed_dictionaries({"completion_tokens": st.integers(0, 99)})),
        "metrics": right_or_wrong(st.fixed_dictionaries({"speculative_decoding": right_or_wrong(records)})),
    },
).map(json.dumps)


@settings(SOME, report_multiple_bugs=False)
@given(
    ids=st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=5), max_size=3),
    last=usage_chunks,
    metrics=st.sampled_from([METRICS, b""]),  # b"": k unknown, learnt from the record
)
def test_engine_survives_malformed_chunks(ids, last, metrics):
    # The stream ends properly; only the record and usage are garbled. (A chunk that makes
    # parse_chunk raise ends the stream earlier, inside the engine's guard.)
    chunks = [json.dumps({"choices": [{"delta": {"content": "x"}, "token_ids": step}]}) for step in ids]
    assert_one_clean_done(run_stream([sse([*chunks, last, "[DONE]"])], metrics))


@SOME
@given(metrics=st.one_of(prometheus_fragments, hostile_expositions))
def test_engine_survives_any_metrics(metrics):
    # /metrics is read when the engine starts and around every reply.
    events = run_stream([sse(["[DONE]"])], metrics=metrics.encode())
    assert_one_clean_done(events)
