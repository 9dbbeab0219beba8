"""The event protocol of engine/protocol/events.h, encoded the same way: one JSON object per line
with ``v``, ``type``, ``rank`` and ``time`` (seconds since the epoch)."""

import json
import math
import time

PROTOCOL_VERSION = 1
PEER_LOST_KIND = "peer"  # an error that follows from another rank's end: never a root cause


def _json_safe(value):
    """JSON has no NaN or infinity: as the engine's encoder does (engine/protocol/events.cpp, Note
    [non-finite numbers]), they are written as the strings "NaN", "Infinity" and "-Infinity", which
    the launcher reads back as numbers: a diverged step is kept, never dropped."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def memory(allocated=0, reserved=0, peak_allocated=0, rss=0):
    return {
        "params": 0,
        "grads": 0,
        "optimizer": 0,
        "activations_peak": 0,
        "allocated": int(allocated),
        "reserved": int(reserved),
        "peak_allocated": int(peak_allocated),
        "rss": int(rss),
    }


def encode(event_type, rank, body, at=None):
    line = {"v": PROTOCOL_VERSION, "type": event_type, "rank": int(rank), "time": time.time() if at is None else at}
    for key, value in body.items():
        line[key] = _json_safe(value)
    return json.dumps(line, separators=(",", ":"))  # a bare NaN that slipped through is read too
