"""The per-rank reporter: sends this rank's events to the Shardscope launcher.

Under ``shardscope launch --script`` the launcher makes one named pipe per rank in the folder
named by ``SHARDSCOPE_EVENT_PIPES`` (``rank<N>.fifo``, N the global rank; torchrun hands its
ranks no inherited descriptors, so a pipe by name is the way in). Without that variable (a plain
``accelerate launch`` in a terminal) each rank appends its events to
``<history>/runs/<script>-<time>/events/rank<N>.jsonl`` and, once every rank has said it is done,
rank 0 runs ``shardscope runs import`` on that folder, so the run lands in the history all the
same (``SHARDSCOPE_NO_HISTORY=1`` turns this off; ``SHARDSCOPE_BIN`` names the shardscope
executable when it is not on PATH).

One reporter per process: ``Reporter(...)`` returns the same object every time, so the tracker,
the Trainer callback and a script's own ``Reporter(accelerator)`` never announce a rank twice.
"""

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

from . import collectives, protocol

_current = None
_current_lock = threading.Lock()

# Error messages of c10d's backends when the other side of a collective went away: the rank that
# sees them is a casualty of another rank's end, not the cause.
_PEER_LOST_MARKERS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "remote process exited",
    "NCCL communicator was aborted",
)


def current_reporter():
    """The process's reporter, or None before one was made."""
    return _current


_statm = None  # /proc/self/statm, kept open: reading it costs a few µs, opening it 20


def _rss_bytes():
    global _statm
    try:
        if _statm is None:
            _statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        return int(os.pread(_statm, 256, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _end_with_parent():
    """torchrun starts its workers in sessions of their own; should it be killed outright, the
    kernel then ends this rank too (PR_SET_PDEATHSIG) instead of leaving it orphaned."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _PipeSink:
    """Writes whole lines to the launcher's named pipe. A line under PIPE_BUF is written at once,
    so the heartbeat thread and the training thread never interleave. A launcher that went away
    (EPIPE) silences the sink; training goes on."""

    def __init__(self, path):
        # The launcher holds the read end open from before the rank starts, so a non-blocking open
        # succeeds at once; blocking writes afterwards keep every event when the pipe is full.
        self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(self._fd, True)
        self._lock = threading.Lock()
        self._broken = False

    def send(self, line):
        data = (line + "\n").encode("utf-8")
        with self._lock:
            if self._broken:
                return
            try:
                while data:
                    written = os.write(self._fd, data)
                    data = data[written:]
            except OSError:
                self._broken = True


def _open_sink(rank):
    folder = os.environ.get("SHARDSCOPE_EVENT_PIPES")
    if not folder:
        return None
    path = os.path.join(folder, "rank%d.fifo" % rank)
    try:
        return _PipeSink(path)
    except OSError as error:
        sys.stderr.write("shardscope: warning: cannot open the launcher's event pipe %s (%s); this rank is not reported\n"
                         % (path, error))
        return None


class _FileSink:
    """Without a launcher: this rank's events appended to its own file (one file per rank, so the
    lines of two ranks never interleave)."""

    def __init__(self, path):
        self.path = path
        self._file = open(path, "a", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()

    def send(self, line):
        with self._lock:
            try:
                self._file.write(line + "\n")
            except (OSError, ValueError):
                pass


def _history_home():
    """The folder the shardscope executable keeps its history in (storage/store_paths.h)."""
    home = os.environ.get("SHARDSCOPE_HOME")
    if home:
        return home
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "shardscope")


def _launch_stamp(world_size):
    """A name part every rank of one launch computes alike, without a collective: the ranks of a
    torchrun launch share their parent (the agent) and its start time; a single process has its own."""
    pid = os.getppid() if world_size > 1 else os.getpid()
    try:
        with open("/proc/%d/stat" % pid) as stat:
            started = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks since boot
        with open("/proc/stat") as proc:
            boot = next(int(line.split()[1]) for line in proc if line.startswith("btime "))
        at = boot + started / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        at = time.time()
    return "%s-%d" % (time.strftime("%Y%m%d-%H%M%S", time.localtime(at)), pid)


def _open_standalone_sink(rank, world_size):
    """(sink, run directory) of a run outside shardscope launch; (None, None) when turned off."""
    if os.environ.get("SHARDSCOPE_NO_HISTORY", "").lower() in ("1", "true", "yes"):
        return None, None
    stem = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "script"))[0] or "script"
    run_dir = os.path.join(_history_home(), "runs", "%s-%s" % (stem, _launch_stamp(world_size)))
    try:
        os.makedirs(os.path.join(run_dir, "events"), exist_ok=True)
        return _FileSink(os.path.join(run_dir, "events", "rank%d.jsonl" % rank)), run_dir
    except OSError as error:
        sys.stderr.write("shardscope: warning: cannot write this run's events under %s (%s); it is not recorded\n"
                         % (run_dir, error))
        return None, None


def _count(batch):
    """(tokens, samples) of a batch: input_ids' elements and first dimension when it has them."""
    if batch is None:
        return 0, 0
    ids = None
    if isinstance(batch, dict):
        ids = batch.get("input_ids")
        if ids is None:
            ids = next((v for v in batch.values() if hasattr(v, "shape")), None)
    elif isinstance(batch, (list, tuple)) and batch:
        ids = batch[0]
    elif hasattr(batch, "shape"):
        ids = batch
    if ids is None or not hasattr(ids, "shape") or len(ids.shape) == 0:
        return 0, 0
    return int(ids.numel()), int(ids.shape[0])


def _step_fields(*, step, epoch, loss, lr, grad_norm, tokens, samples, counted, step_time, skipped):
    """A step event's fields. What the script did not give and the reporter cannot know is left
    out, not sent as 0 (the Run page drew flat zeros for it): the learning rate without an
    optimizer it can see, the gradient norm unless given, tokens and samples when no batch could be
    counted and none were given."""
    fields = {"step": step, "epoch": epoch, "loss": loss, "local_loss": loss, "skipped": skipped, "step_time": step_time}
    if lr is not None:
        fields["lr"] = float(lr)
    if grad_norm is not None:
        fields["grad_norm"] = float(grad_norm)
    if counted:
        fields["tokens"] = tokens
        fields["samples"] = samples
        fields["tokens_per_s"] = tokens / step_time if step_time > 0 else 0.0
    return fields


class Reporter:
    """This rank's reporter. ``Reporter(accelerator)`` then ``reporter.step(loss, batch)`` after each
    optimizer step, on every rank (it does one small all-reduce for the global loss and tokens, so
    every rank must call it, as every rank calls ``accelerator.backward``)."""

    def __new__(cls, accelerator=None):
        global _current
        with _current_lock:
            if _current is None:
                _current = super().__new__(cls)
                _current._started = False
            return _current

    def __init__(self, accelerator=None):
        if accelerator is not None:
            self.accelerator = accelerator
        if self._started:
            return
        self._started = True
        if accelerator is None:
            self.accelerator = None
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.steps = 0
        self.skipped_steps = 0
        self.phase = "setup"
        self._start = time.time()
        self._last_step_at = time.perf_counter()
        self._pending_tokens = 0
        self._pending_samples = 0
        self._pending_counted = False  # a batch of this step was countable, or tokens were given
        self._failed = False
        self._done = False
        self._pending = None  # (all-reduce in flight or None, step event body) of the last step
        self._clock = collectives.StepClock()  # the steps done when a collective was issued
        # Under shardscope launch: the launcher's requests for this rank's collectives and stacks.
        run_dir = os.environ.get("SHARDSCOPE_RUN_DIR")
        self._answerer = collectives.FlightAnswerer(run_dir, self.rank) if run_dir else None
        # SHARDSCOPE_COLLECTIVE_STATE=0: heartbeats without the pending collective (for the A/B of
        # scripts/bench-script-recording.sh; a hang in a collective then goes unseen).
        self._collective_state = os.environ.get("SHARDSCOPE_COLLECTIVE_STATE", "1") != "0"
        self._pending_watch = collectives.PendingWatch()
        self._sink = _open_sink(self.rank)
        self.run_dir = None  # set when the run is recorded without a launcher
        if self._sink is None and "SHARDSCOPE_EVENT_PIPES" not in os.environ:
            self._sink, self.run_dir = _open_standalone_sink(self.rank, self.world_size)
            if self._sink is not None:
                self._hello()
                self._install_hooks()
                if self.rank == 0:
                    self._write_run_info()
            return
        if self._sink is None:
            return
        _end_with_parent()
        self._hello()
        self._install_hooks()
        period = int(os.environ.get("SHARDSCOPE_HEARTBEAT_MS", "2000")) / 1000.0
        if period > 0:
            threading.Thread(target=self._beat, args=(period,), name="shardscope-heartbeat", daemon=True).start()

    @property
    def connected(self):
        """Whether events go anywhere (the script runs under shardscope launch)."""
        return self._sink is not None

    def _send(self, event_type, body):
        if self._sink is not None:
            self._sink.send(protocol.encode(event_type, self.rank, body))

    def _device(self):
        accelerator = self.accelerator
        if accelerator is not None:
            return str(accelerator.device)
        if os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes"):
            return "cpu"
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return "cuda:%d" % self.local_rank
        return "cpu"

    def _hello(self):
        torch = sys.modules.get("torch")
        self._send("hello", {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "device": self._device(),
            "torch": getattr(torch, "__version__", "") if torch is not None else "",
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "machine_rank": int(os.environ.get("GROUP_RANK", "0")),
        })

    def _install_hooks(self):
        previous = sys.excepthook

        def report_exception(kind, value, trace):
            self.error(value)
            previous(kind, value, trace)

        sys.excepthook = report_exception
        atexit.register(self.close)

    def _beat(self, period):
        while not self._done:
            # Before the beat, as engine ranks do: the launcher waits for the answer.
            if self._answerer is not None:
                self._answerer.answer(self.steps, self.phase, self._clock)
            body = {"step": self.steps, "phase": self.phase, "cpu_seconds": time.process_time()}
            waiting = self._pending_watch.oldest() if self._collective_state else None
            if waiting is not None:
                body["waiting"] = waiting
            self._send("heartbeat", body)
            time.sleep(period)

    def _memory(self):
        torch = sys.modules.get("torch")
        device = self._device()
        if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
            stats = torch.cuda.memory_stats()
            return protocol.memory(allocated=stats.get("allocated_bytes.all.current", 0),
                                   reserved=stats.get("reserved_bytes.all.current", 0),
                                   peak_allocated=stats.get("allocated_bytes.all.peak", 0), rss=_rss_bytes())
        return protocol.memory(rss=_rss_bytes())

    def _learning_rate(self):
        accelerator = self.accelerator
        optimizers = getattr(accelerator, "_optimizers", None) if accelerator is not None else None
        if optimizers:
            return float(optimizers[0].param_groups[0]["lr"])
        return None  # not known: not sent

    def _loss_scale(self):
        scaler = getattr(self.accelerator, "scaler", None) if self.accelerator is not None else None
        if scaler is not None and scaler.is_enabled():
            return float(scaler.get_scale())
        return None

    def _start_global(self, local_loss, tokens):
        """Starts the all-reduce of [loss, tokens] that gives the mean loss over ranks and the
        tokens of all ranks, asynchronously: it runs while the next step computes and is read at
        the next report (a blocking one cost a toy CPU step 17 %: docs/BENCHMARKS.md, "Reporter").
        None when there is nothing to reduce."""
        torch = sys.modules.get("torch")
        if torch is None or self.world_size <= 1 or not torch.distributed.is_initialized():
            return None
        device = self._device() if self._device().startswith("cuda") else "cpu"
        both = torch.tensor([local_loss, float(tokens)], dtype=torch.float64, device=device)
        return torch.distributed.all_reduce(both, async_op=True), both

    def _send_pending_step(self, wait=True):
        """The last step's event, once its all-reduce is in (normally long done). Without `wait`
        (a rank that failed: its peers may never join) only a finished reduction is read."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        reduction, body = pending
        if reduction is not None:
            work, both = reduction
            try:
                if not wait and not work.is_completed():
                    raise RuntimeError("not reduced")
                work.wait()
                total = both.tolist()
                body["loss"] = total[0] / self.world_size
                step_time = body["step_time"]
                if "tokens_per_s" in body:
                    body["tokens_per_s"] = int(total[1]) / step_time if step_time > 0 else 0.0
            except Exception:  # the group went away (a peer ended): the local numbers stand
                pass
        self._send("step", body)

    def step(self, loss, batch=None, *, lr=None, grad_norm=None, tokens=None, samples=None, epoch=0):
        """Reports one optimizer step: call it after ``optimizer.step()`` on every rank. Under
        gradient accumulation a call on a micro-batch that did not sync gradients only counts its
        batch. ``loss`` may be a tensor or a number. The event goes out at the next call (or at
        exit), when the global loss of this step is known."""
        batch_tokens, batch_samples = _count(batch)
        self._pending_tokens += batch_tokens if tokens is None else int(tokens)
        self._pending_samples += batch_samples if samples is None else int(samples)
        self._pending_counted = self._pending_counted or tokens is not None or batch_samples > 0
        if self.accelerator is not None and not getattr(self.accelerator, "sync_gradients", True):
            return
        if self._sink is None:
            self.steps += 1
            self._pending_tokens = self._pending_samples = 0
            self._pending_counted = False
            return
        self._send_pending_step()
        now = time.perf_counter()
        step_time = now - self._last_step_at
        self._last_step_at = now
        local = float(loss.detach().float().item()) if hasattr(loss, "detach") else float(loss)
        step_tokens, step_samples, counted = self._pending_tokens, self._pending_samples, self._pending_counted
        self._pending_tokens = self._pending_samples = 0
        self._pending_counted = False
        skipped = bool(getattr(self.accelerator, "optimizer_step_was_skipped", False)) if self.accelerator else False
        self.skipped_steps += int(skipped)
        self.steps += 1
        self._clock.step_ended()
        self.phase = "train"
        body = self._step_body(**_step_fields(step=self.steps, epoch=epoch, loss=local,
                                              lr=self._learning_rate() if lr is None else lr, grad_norm=grad_norm,
                                              tokens=step_tokens, samples=step_samples, counted=counted,
                                              step_time=step_time, skipped=skipped))
        self._pending = (self._start_global(local, step_tokens), body)
        if self._pending[0] is None:
            self._send_pending_step()

    def _step_body(self, **fields):
        scale = self._loss_scale()
        body = dict(fields)
        body["skipped_steps"] = self.skipped_steps
        body["mem"] = self._memory()
        if scale is not None:
            body["loss_scale"] = scale
        return body

    def _step_event(self, **fields):
        self._send("step", self._step_body(**fields))

    def record_step(self, step, loss, *, local_loss=None, lr=None, grad_norm=None, tokens=None, samples=0,
                    step_time=0.0, epoch=0, tokens_per_s=None):
        """A step whose numbers come from elsewhere (the Trainer's logs): no collective. What is
        None was not logged and is not sent (see _step_fields)."""
        self.steps = int(step)
        self._clock.step_ended()
        self.phase = "train"
        fields = _step_fields(step=int(step), epoch=int(epoch), loss=float(loss), lr=lr, grad_norm=grad_norm,
                              tokens=int(tokens or 0), samples=int(samples), counted=tokens is not None,
                              step_time=float(step_time), skipped=False)
        fields["local_loss"] = float(loss if local_loss is None else local_loss)
        if tokens_per_s is not None and tokens is not None:
            fields["tokens_per_s"] = float(tokens_per_s)
        self._step_event(**fields)

    def eval(self, loss, step=None, **metrics):
        body = {"step": self.steps if step is None else int(step), "loss": float(loss)}
        body.update({k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and k not in body})
        self._send("eval", body)

    def checkpoint(self, path, step=None, kind="state"):
        size = 0
        for folder, _, files in os.walk(path):
            for name in files:
                try:
                    size += os.path.getsize(os.path.join(folder, name))
                except OSError:
                    pass
        self._send("checkpoint", {"step": self.steps if step is None else int(step), "path": os.path.abspath(path),
                                  "kind": kind, "bytes": size})

    def log(self, message, level="info"):
        self._send("log", {"level": level, "message": str(message)})

    def error(self, exception):
        """Reports the exception that ends this rank (the excepthook calls it)."""
        message = "%s: %s" % (type(exception).__name__, exception)
        kind = protocol.PEER_LOST_KIND if any(m in message for m in _PEER_LOST_MARKERS) else "exception"
        self._failed = True
        self._send("error", {"kind": kind, "message": message[:4000]})

    def close(self):
        """The rank's last event (atexit calls it): completed, or failed after an exception."""
        if self._done:
            return
        self.phase = "finish"
        self._done = True
        self._send_pending_step(wait=not self._failed)
        self._send("done", {"status": "failed" if self._failed else "completed", "steps": self.steps,
                            "wall": time.time() - self._start})
        if self.run_dir is not None and self.rank == 0:
            self._import_run()

    def _write_run_info(self):
        """What the history needs to know of a run no launcher saw: how Accelerate ran it."""
        state = getattr(self.accelerator, "state", None) if self.accelerator is not None else None
        distributed = getattr(getattr(state, "distributed_type", None), "value", "") if state is not None else ""
        precision = str(getattr(self.accelerator, "mixed_precision", "") or "") if self.accelerator is not None else ""
        info = {"distributed_type": distributed, "mixed_precision": precision, "num_processes": self.world_size,
                "script": os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "", "argv": sys.argv[1:]}
        try:
            with open(os.path.join(self.run_dir, "run.json"), "w") as out:
                json.dump(info, out, indent=1)
        except OSError:
            pass

    def _import_run(self, patience=30.0):
        """Rank 0, at exit: once every rank's file ends with its done event (or after `patience`
        seconds), the run goes into the history through `shardscope runs import`."""
        deadline = time.time() + patience
        while time.time() < deadline and not all(self._rank_done(r) for r in range(self.world_size)):
            time.sleep(0.2)
        program = os.environ.get("SHARDSCOPE_BIN") or shutil.which("shardscope")
        if not program:
            sys.stderr.write("shardscope: this run's events are in %s; `shardscope runs import %s` puts it into the "
                             "history (shardscope is not on PATH; SHARDSCOPE_BIN names it)\n" % (self.run_dir, self.run_dir))
            return
        try:
            result = subprocess.run([program, "runs", "import", self.run_dir], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as error:
            sys.stderr.write("shardscope: could not run %s runs import %s: %s\n" % (program, self.run_dir, error))
            return
        said = (result.stdout + result.stderr).strip()
        sys.stderr.write("shardscope: %s\n" % (said if result.returncode == 0 else "the run was not recorded: " + said))

    def _rank_done(self, rank):
        path = os.path.join(self.run_dir, "events", "rank%d.jsonl" % rank)
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 4096))
                lines = f.read().splitlines()
            return bool(lines) and b'"type":"done"' in lines[-1]
        except OSError:
            return False
