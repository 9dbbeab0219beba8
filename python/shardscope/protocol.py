"""The event protocol of engine/protocol/events.h, encoded the same way: one JSON object per line
with ``v``, ``type``, ``rank`` and ``time`` (seconds since the epoch)."""

import json
import math
import time

PROTOCOL_VERSION = 1
PEER_LOST_KIND = "peer"  # an error that follows from another rank's end: never a root cause


def _finite(value):
    value = float(value)
    return value if math.isfinite(value) else None


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
        # JSON has no NaN or infinity: like the engine's encoder (nlohmann's), such a value is null.
        line[key] = _finite(value) if isinstance(value, float) else value
    return json.dumps(line, separators=(",", ":"))
