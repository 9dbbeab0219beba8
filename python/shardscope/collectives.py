"""This rank's collectives and stacks, for the launcher's hang diagnosis of a user's script.

PyTorch's Flight Recorder keeps, per rank, the last collectives of every process group (on by
default, ``TORCH_FR_BUFFER_SIZE`` entries; Gloo records into it on the CPU as NCCL does on the GPU,
checked on torch 2.14). The reporter's heartbeat thread reads it:

- every beat, the oldest collective still pending (PendingWatch), sent with the heartbeat (the
  launcher's live detection: a rank in no collective while its peers wait past the timeout is the
  one to blame);
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


def _dump(collectives=True):
    """The Flight Recorder's entries and process-group status, or None where torch has none. With
    ``collectives=False`` only the groups' last enqueued and completed numbers: 15 µs, where the
    entries of a full recorder (2000 by default) take 50 ms to write and read on a CPU core."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace_json", None) if c10d is not None else None
    if dump is None:
        return None
    try:
        return json.loads(dump(collectives, False))
    except Exception:  # a torch whose dump fails must not end the heartbeat
        return None


def _kind(entry):
    name = str(entry.get("profiling_name", "")).rpartition(":")[2]
    return _KINDS.get(name, name)


def _group(entry):
    """The group's name in the records: default_pg for the default group; another group by its
    id, with its description where it has one (descriptions repeat: every unnamed new_group is
    'undefined')."""
    group = entry.get("process_group") or ["", ""]
    name = str(group[0]) if len(group) > 0 else ""
    desc = str(group[1]) if len(group) > 1 and group[1] else ""
    if name in ("0", "") or desc == "default_pg":
        return "default_pg"
    return name if desc in ("", "undefined") else f"{desc} ({name})"


def _size(entry):
    """Bytes of this rank's input and its first dtype, in the engine's names."""
    total = 0
    dtype = ""
    for shape, name in zip(entry.get("input_sizes") or [], entry.get("input_dtypes") or []):
        dtype_name, width = _DTYPES.get(name, (str(name).lower(), 0))
        dtype = dtype or dtype_name
        count = 1
        for extent in shape or []:
            count *= int(extent or 0)
        total += count * width
    return total, dtype


def _pending(entry):
    return not entry.get("retired", False) and entry.get("state") != "completed"


class PendingWatch:
    """The oldest collective this rank issued that has not completed, as a heartbeat's ``waiting``
    field, read once a beat. Each beat asks only the groups' numbers (enqueued past completed);
    the collective's kind, group name and issue time are read from the whole record only when the
    same one is still pending a beat later (at any instant of training some collective is in
    flight; one still there a beat later is a wait worth naming), once per such collective."""

    def __init__(self):
        self._suspect = None  # (group id, seq) pending at the last beat
        self._known = None  # ((group id, seq), its waiting field without "seconds", issue time)

    def oldest(self):
        dump = _dump(collectives=False)
        pending = []
        for group_id, status in ((dump or {}).get("pg_status") or {}).items():
            try:
                completed = int(status.get("last_completed_collective", -1))
                if int(status.get("last_enqueued_collective", -1)) > completed:
                    pending.append((str(group_id), completed + 1))
            except (TypeError, ValueError):
                continue
        if not pending:
            self._suspect = self._known = None
            return None
        key = min(pending, key=lambda k: k[1])
        if self._known is None or self._known[0] != key:
            if key != self._suspect:
                self._suspect = key
                return None
            self._known = (key,) + self._describe(key)
        _, waiting, issued_at = self._known
        return dict(waiting, seconds=max(0.0, time.time() - issued_at))

    @staticmethod
    def _describe(key):
        for entry in (_dump() or {}).get("entries", []):
            group = entry.get("process_group") or ["", ""]
            if str(group[0]) == key[0] and int(entry.get("collective_seq_id", 0)) == key[1]:
                waiting = {"collective": _kind(entry), "group": _group(entry), "seq": key[1]}
                return waiting, entry.get("time_created_ns", 0) / 1e9
        # Out of the ring already (a full recorder): the number alone, timed from now.
        return {"collective": "collective", "group": "default_pg" if key[0] == "0" else key[0], "seq": key[1]}, time.time()


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


def record_of_dump(dump, rank, request=0, steps=0, phase="", clock=None):
    """A rank's record in the engine's flight-record format, from a dump of torch's Flight Recorder
    (the live JSON one, or a pickle torch wrote: flight_dumps.py). Without a step clock the step of
    each collective is unknown (0) and its phase empty."""
    collectives = []
    issued = {}
    seen = set()
    entries = [e for e in dump.get("entries") or [] if isinstance(e, dict)]
    for entry in sorted(entries, key=lambda e: e.get("time_created_ns") or 0):
        if entry.get("is_p2p"):
            continue
        group = _group(entry)
        seq = int(entry.get("collective_seq_id") or 0)
        if (group, seq) in seen:  # the parts of one coalesced collective share its number: one record
            continue
        seen.add((group, seq))
        issued[group] = max(issued.get(group, 0), seq)
        issued_at = (entry.get("time_created_ns") or 0) / 1e9
        completed_ns = entry.get("time_discovered_completed_ns") or 0
        bytes_, dtype = _size(entry)
        collectives.append({
            "group": group, "seq": seq, "kind": _kind(entry), "bytes": bytes_, "dtype": dtype,
            "step": clock.steps_done_at(issued_at) if clock else 0, "phase": "train" if clock else "",
            "issued_at": issued_at,
            # Gloo's work does not time its completion: a retired one completed by its issue time at most.
            "completed_at": None if _pending(entry) else (completed_ns / 1e9 if completed_ns else issued_at),
        })
    return {"rank": rank, "request": request, "time": time.time(), "step": steps, "phase": phase, "issued": issued,
            "collectives": collectives}


def flight_record(rank, request, steps, phase, clock):
    """This rank's record in the engine's flight-record format, from torch's Flight Recorder now."""
    return record_of_dump(_dump() or {}, rank, request, steps, phase, clock)


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
