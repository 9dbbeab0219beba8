"""This rank's collectives and stacks, for the launcher's hang diagnosis of a user's script.

PyTorch's Flight Recorder keeps, per rank, the last collectives of every process group (on by
default, ``TORCH_FR_BUFFER_SIZE`` entries; Gloo records into it on the CPU as NCCL does on the GPU,
checked on torch 2.14). The reporter's heartbeat thread reads it:

- every beat, the oldest collective still pending, sent with the heartbeat (the launcher's live
  detection: a rank in no collective while its peers wait past the timeout is the one to blame);
- on the launcher's request (``flight/request`` in the run directory, as engine ranks answer it),
  the whole record in the engine's format (engine/protocol/flight_record.h: ``flight/rank<N>.json``)
  and every thread's Python stack (``flight/rank<N>.stacks.txt``), so that the hang report,
  ``shardscope runs diagnose`` and the Run page read a script's ranks as they read the engine's.

A torch without the Flight Recorder's JSON dump (before 2.7) gives no collectives: the heartbeats
and stacks still go out.
"""

import bisect
import json
import os
import sys
import threading
import time
import traceback

# The Flight Recorder's dtype names (c10's ScalarType) as the engine writes them, with their sizes.
_DTYPES = {
    "Float": ("float32", 4), "Double": ("float64", 8), "Half": ("float16", 2), "BFloat16": ("bfloat16", 2),
    "Long": ("int64", 8), "Int": ("int32", 4), "Short": ("int16", 2), "Char": ("int8", 1), "Byte": ("uint8", 1),
    "Bool": ("bool", 1), "Float8_e4m3fn": ("float8_e4m3fn", 1), "Float8_e5m2": ("float8_e5m2", 1),
}
# Its collective names (after "gloo:" or "nccl:") as the engine names them.
_KINDS = {"allreduce": "all_reduce", "_allgather_base": "all_gather", "allgather": "all_gather",
          "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
          "allgather_into_tensor_coalesced": "all_gather", "allreduce_coalesced": "all_reduce"}


def _dump(only_active):
    """The Flight Recorder's entries and process-group status, or None where torch has none."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace_json", None) if c10d is not None else None
    if dump is None:
        return None
    try:
        return json.loads(dump(True, only_active))
    except Exception:  # a torch whose dump fails must not end the heartbeat
        return None


def _kind(entry):
    name = str(entry.get("profiling_name", "")).rpartition(":")[2]
    return _KINDS.get(name, name)


def _group(entry):
    group = entry.get("process_group") or ["", ""]
    return str(group[1] if len(group) > 1 and group[1] else group[0])


def _size(entry):
    """Bytes of this rank's input and its first dtype, in the engine's names."""
    total = 0
    dtype = ""
    for shape, name in zip(entry.get("input_sizes") or [], entry.get("input_dtypes") or []):
        dtype_name, width = _DTYPES.get(name, (str(name).lower(), 0))
        dtype = dtype or dtype_name
        count = 1
        for extent in shape:
            count *= int(extent)
        total += count * width
    return total, dtype


def _pending(entry):
    return not entry.get("retired", False) and entry.get("state") != "completed"


def oldest_pending():
    """The oldest collective this rank issued that has not completed, as a heartbeat's ``waiting``
    field, or None."""
    dump = _dump(only_active=True)
    if not dump:
        return None
    pending = [e for e in dump.get("entries", []) if _pending(e)]
    if not pending:
        return None
    oldest = min(pending, key=lambda e: e.get("time_created_ns", 0))
    return {"collective": _kind(oldest), "group": _group(oldest), "seq": int(oldest.get("collective_seq_id", 0)),
            "seconds": max(0.0, time.time() - oldest.get("time_created_ns", 0) / 1e9)}


class StepClock:
    """When each step ended (wall time), so a collective's issue time gives the steps done then."""

    def __init__(self, keep=4096):
        self._ends = []
        self._first = 0  # steps done before the first kept end
        self._keep = keep

    def step_ended(self):
        self._ends.append(time.time())
        if len(self._ends) > 2 * self._keep:
            self._first += len(self._ends) - self._keep
            self._ends = self._ends[-self._keep:]

    def steps_done_at(self, when):
        return self._first + bisect.bisect_right(self._ends, when)


def flight_record(rank, request, steps, phase, clock):
    """This rank's record in the engine's flight-record format, from torch's Flight Recorder."""
    collectives = []
    issued = {}
    dump = _dump(only_active=False) or {}
    for entry in sorted(dump.get("entries", []), key=lambda e: e.get("time_created_ns", 0)):
        if entry.get("is_p2p"):
            continue
        group = _group(entry)
        seq = int(entry.get("collective_seq_id", 0))
        issued[group] = max(issued.get(group, 0), seq)
        issued_at = entry.get("time_created_ns", 0) / 1e9
        completed_ns = entry.get("time_discovered_completed_ns", 0)
        bytes_, dtype = _size(entry)
        collectives.append({
            "group": group, "seq": seq, "kind": _kind(entry), "bytes": bytes_, "dtype": dtype,
            "step": clock.steps_done_at(issued_at), "phase": "train", "issued_at": issued_at,
            # Gloo's work does not time its completion: a retired one completed by its issue time at most.
            "completed_at": None if _pending(entry) else (completed_ns / 1e9 if completed_ns else issued_at),
        })
    return {"rank": rank, "request": request, "time": time.time(), "step": steps, "phase": phase, "issued": issued,
            "collectives": collectives}


def python_stacks(skip_thread):
    """Every thread's Python stack, the main thread first, innermost call last (as a traceback
    prints it): the file and line each thread of the user's script is at."""
    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    frames = sys._current_frames()
    lines = []
    for ident in sorted(frames, key=lambda i: (i != main, i)):
        if ident == skip_thread:
            continue
        lines.append('Thread "%s" (%d):' % (names.get(ident, "?"), ident))
        for entry in traceback.format_stack(frames[ident]):
            lines.extend("  " + line for line in entry.rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n"


def _write_whole(path, text):
    """Written whole, then renamed: a reader never sees half a file."""
    partial = path + ".partial"
    with open(partial, "w") as out:
        out.write(text)
    os.replace(partial, path)


class FlightAnswerer:
    """Answers the launcher's requests for this rank's flight record and stacks (from the
    heartbeat thread, which runs whatever the training thread does)."""

    def __init__(self, run_dir, rank):
        self.folder = os.path.join(run_dir, "flight")
        self.rank = rank
        self._answered = 0

    def answer(self, steps, phase, clock):
        try:
            with open(os.path.join(self.folder, "request")) as request_file:
                request = int(request_file.read().split()[0])
        except (OSError, ValueError, IndexError):
            return
        if request <= self._answered:
            return
        self._answered = request
        try:
            stacks = python_stacks(threading.get_ident())
            _write_whole(os.path.join(self.folder, "rank%d.stacks.txt" % self.rank),
                         "request %d\n%s" % (request, stacks))
            record = flight_record(self.rank, request, steps, phase, clock)
            _write_whole(os.path.join(self.folder, "rank%d.json" % self.rank), json.dumps(record, indent=1) + "\n")
        except OSError:
            pass
