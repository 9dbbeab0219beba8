"""PyTorch's own Flight Recorder dumps, and torchfrtrace's verdict on them: the reference for
`shardscope runs diagnose FOLDER` (tests/app/tst_torch_flight_dumps).

    flight_dumps_reference.py make FOLDER --ranks N --fault none|skip|kind|size --rank R
        N Gloo ranks on this machine issue three all_reduces, then collective 4: rank R skips it
        (skip), issues all_gather instead (kind) or all_reduce of twice the elements (size); the
        others issue the all_reduce. Each rank then writes what torch's Flight Recorder dumps
        (torch._C._distributed_c10d._dump_fr_trace, the bytes torch writes to
        TORCH_FR_DUMP_TEMP_FILE on a timeout) to FOLDER/torch_fr_rank<N>.

    flight_dumps_reference.py torchfrtrace FOLDER
        torchfrtrace (torch.distributed.flight_recorder, the torch of the venv) on the dumps; prints
        its verdict as JSON: {"seq", "collective", "missing_ranks", "culprit_ranks", "error_type",
        "text"}; seq 0 when it finds nothing wrong.

torch 2.14's Gloo names the default group '' in the dump's pg_config while its entries name it
'0', and torchfrtrace then fails with KeyError ('0', 0). The dumps it reads are copies with that
one key renamed to the name the entries use (where the dump has one group), nothing else changed.
"""

import argparse
import json
import os
import pickle
import re
import socket
import subprocess
import sys
import tempfile
import time


def _rank(rank, world, port, folder, fault, odd):
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    if rank == odd and fault == "skip":
        pass
    elif rank == odd and fault == "kind":
        dist.all_gather([torch.zeros(4) for _ in range(world)], t, async_op=True)
    elif rank == odd and fault == "size":
        dist.all_reduce(torch.ones(8), async_op=True)
    else:
        work = dist.all_reduce(t, async_op=True)
        if fault == "none":
            work.wait()
    time.sleep(2)  # every rank has issued what it will
    with open(os.path.join(folder, f"torch_fr_rank{rank}"), "wb") as f:
        f.write(_dump_fr_trace(includeCollectives=True, includeStackTraces=False, onlyActive=False))
    sys.stdout.flush()
    os._exit(0)  # the ranks wait in a collective that never ends: leave without tearing Gloo down


def make(args):
    import torch.multiprocessing as mp

    os.makedirs(args.folder, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_rank, args=(args.ranks, port, args.folder, args.fault, args.rank), nprocs=args.ranks,
                       start_method="spawn")
    return 0


def _repaired_copy(folder, into):
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            dump = pickle.load(f)
        names = {str(e["process_group"][0]) for e in dump.get("entries", [])}
        config = dump.get("pg_config", {})
        if list(config) == [""] and len(names) == 1:
            dump["pg_config"] = {names.pop(): config[""]}
        with open(os.path.join(into, name), "wb") as f:
            pickle.dump(dump, f)


def verdict(args):
    with tempfile.TemporaryDirectory() as copy:
        _repaired_copy(args.folder, copy)
        # torchfrtrace's own entry point (it prints through its logger, so it runs as a process).
        entry = ("import sys; from torch.distributed.flight_recorder.fr_trace import main;"
                 " sys.argv = ['torchfrtrace'] + sys.argv[1:]; main()")
        ran = subprocess.run([sys.executable, "-c", entry, copy, "-p", "torch_fr_rank"],
                             capture_output=True, text=True, timeout=300, check=False)
    if ran.returncode != 0:
        sys.exit("torchfrtrace failed: " + ran.stderr[-3000:])
    text = ran.stdout + ran.stderr
    seq = re.search(r"(?:sequence number:|Collective sequence number:) (\d+)", text)
    collective = re.search(r"collective: \w+:(\w+)", text)
    missing = re.search(r"missing ranks: \{([\d, ]*)\}", text)
    error_type = re.search(r"Error type: (\w+)", text)
    result = {
        "seq": int(seq.group(1)) if seq else 0,
        "collective": collective.group(1) if collective else "",
        "missing_ranks": sorted(int(r) for r in missing.group(1).split(",") if r.strip()) if missing else [],
        "culprit_ranks": sorted({int(r) for r in re.findall(r"Culprit rank (\d+)", text)}),
        "error_type": error_type.group(1) if error_type else "",
        "text": text,
    }
    print(json.dumps(result))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("folder")
    m.add_argument("--ranks", type=int, default=2)
    m.add_argument("--fault", choices=["none", "skip", "kind", "size"], default="skip")
    m.add_argument("--rank", type=int, default=1)
    v = sub.add_parser("torchfrtrace")
    v.add_argument("folder")
    args = parser.parse_args()
    return make(args) if args.command == "make" else verdict(args)


if __name__ == "__main__":
    sys.exit(main())
