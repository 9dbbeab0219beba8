"""The Python side of the event protocol agrees with the C++ side (engine/protocol/events.h, the
decoder in events.cpp, the launcher's environment): the names are typed twice, once per
language, and these tests are what ties them together without a launch."""

import json
import math
import os
import re

import pytest

from conftest import REPO_ROOT
from shardscope import protocol
from shardscope import reporter as reporter_module


def read(path):
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
        return f.read()


def cpp_sources(*folders):
    text = []
    for folder in folders:
        for root, _, files in os.walk(os.path.join(REPO_ROOT, folder)):
            text += [read(os.path.join(root, name)) for name in files if name.endswith((".h", ".cpp"))]
    return "\n".join(text)


def test_protocol_version_is_the_engines():
    version = re.search(r"kProtocolVersion\s*=\s*(\d+);", read("engine/protocol/events.h"))
    assert version, "kProtocolVersion not found in engine/protocol/events.h"
    assert protocol.PROTOCOL_VERSION == int(version.group(1))


def test_peer_lost_kind_is_the_engines():
    kind = re.search(r'kPeerLostKind\s*=\s*"([^"]+)"', read("engine/protocol/events.h"))
    assert kind and protocol.PEER_LOST_KIND == kind.group(1)


def test_every_environment_name_the_package_reads_is_set_or_read_by_the_cpp_side():
    package = "\n".join(read(os.path.join("python", "shardscope", name))
                        for name in os.listdir(os.path.join(REPO_ROOT, "python", "shardscope")) if name.endswith(".py"))
    names = set(re.findall(r"SHARDSCOPE_[A-Z_]+", package))
    assert {"SHARDSCOPE_EVENT_PIPES", "SHARDSCOPE_HEARTBEAT_MS", "SHARDSCOPE_HOME"} <= names
    cpp = cpp_sources("app", "engine", "storage", "ui")
    missing = sorted(name for name in names if name not in cpp)
    # SHARDSCOPE_NO_HISTORY and SHARDSCOPE_BIN are the user's switches for a script run outside a
    # launch; SHARDSCOPE_COLLECTIVE_STATE the A/B switch of scripts/bench-script-recording.sh.
    users = {"SHARDSCOPE_BIN", "SHARDSCOPE_NO_HISTORY", "SHARDSCOPE_COLLECTIVE_STATE"}
    assert set(missing) <= users, missing


def test_a_line_is_strict_json_and_keeps_non_finite_values():
    # #43 point 4: a NaN loss is kept (as the string the engine's decoder reads back as NaN), never
    # written as null or as Python's bare NaN (not JSON).
    text = protocol.encode("step", 3, {"loss": float("nan"), "lr": float("inf"), "step": 2,
                                       "mem": {"rss": 1, "x": -math.inf}}, at=12.5)
    line = json.loads(text, parse_constant=lambda name: pytest.fail("bare " + name))
    assert line == {"v": protocol.PROTOCOL_VERSION, "type": "step", "rank": 3, "time": 12.5, "loss": "NaN",
                    "lr": "Infinity", "step": 2, "mem": {"rss": 1, "x": "-Infinity"}}
    assert '"loss":"NaN"' in protocol.encode("eval", 0, {"loss": math.nan})


@pytest.fixture
def reporter(monkeypatch):
    """A Reporter whose events are collected in a list (no launcher, no thread, no hooks)."""
    lines = []

    class ListSink:
        def send(self, line):
            lines.append(json.loads(line))

    monkeypatch.setenv("SHARDSCOPE_EVENT_PIPES", "unused")
    monkeypatch.setenv("SHARDSCOPE_HEARTBEAT_MS", "0")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(reporter_module, "_open_sink", lambda rank: ListSink())
    monkeypatch.setattr(reporter_module, "_end_with_parent", lambda: None)
    monkeypatch.setattr(reporter_module.Reporter, "_install_hooks", lambda self: None)
    monkeypatch.setattr(reporter_module, "_current", None)
    r = reporter_module.Reporter()
    yield r, lines
    reporter_module._current = None


def test_every_field_the_reporter_writes_is_one_the_decoder_reads(reporter):
    r, lines = reporter
    r.record_step(4, 2.5, lr=0.001, grad_norm=1.5, tokens=64, samples=2, step_time=0.25, tokens_per_s=256.0)
    r.eval(2.25, accuracy=0.5)
    decoder = read("engine/protocol/events.cpp")
    kinds = {line["type"] for line in lines}
    assert {"hello", "step", "eval"} <= kinds, kinds
    unknown = set()
    for line in lines:
        for key, value in line.items():
            if line["type"] == "eval" and key == "accuracy":
                continue  # an eval's named metrics are free-form
            if '"%s"' % key not in decoder:
                unknown.add("%s.%s" % (line["type"], key))
            if isinstance(value, dict):
                unknown |= {"%s.%s.%s" % (line["type"], key, k) for k in value if '"%s"' % k not in decoder}
    assert not unknown, "fields the C++ decoder never reads: %s" % sorted(unknown)
    step = next(line for line in lines if line["type"] == "step")
    assert step["rank"] == 1 and step["step"] == 4 and step["loss"] == 2.5


def test_a_step_without_a_learning_rate_or_tokens_sends_none(reporter):
    # #45 point 10: what the Trainer or tracker did not log is left out, not sent as 0.
    r, lines = reporter
    r.record_step(5, 1.75, step_time=0.5)
    step = [line for line in lines if line["type"] == "step"][-1]
    assert step["loss"] == 1.75
    for key in ("lr", "grad_norm", "tokens", "samples", "tokens_per_s"):
        assert key not in step, key
