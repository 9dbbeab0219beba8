"""PyTorch's own Flight Recorder dumps as the engine's flight records, for ``shardscope runs
diagnose FOLDER``: the files torch writes, one per rank (``TORCH_FR_DUMP_TEMP_FILE`` + the rank on a
collective timeout, or what ``torch._C._distributed_c10d._dump_fr_trace`` returns), named
``<prefix><rank>`` as torchfrtrace takes them, from any run (Shardscope's or not; NCCL or Gloo).

Prints one flight record (JSON, engine/protocol/flight_record.h) per line, one per rank found, and
then a line ``{"skipped": [...], "world_size": N}``: the files that are not such dumps (or a second
file of a rank, or one that cannot be read), and the ranks of the default group as the dumps name
them (0 when they do not). Standard library only (a dump is a pickle of plain dicts and lists):
runs as a file, without torch or this package.

    python3 flight_dumps.py FOLDER
"""

import json
import os
import pickle
import re
import sys

try:
    from . import collectives
except ImportError:  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import collectives


class _PlainData(pickle.Unpickler):
    """Only plain data: a dump holds nothing else, and a file in the folder may be anyone's."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def read_dump(path):
    """The dump in `path`, or None when the file is not one."""
    try:
        with open(path, "rb") as f:
            dump = _PlainData(f).load()
    except Exception:
        return None
    return dump if isinstance(dump, dict) and isinstance(dump.get("entries"), list) else None


_MAX_RANK = 65535


def world_size_of(dump):
    """The size of the default group, from the dump's pg_config ('[0, 1, 2]'), or 0."""
    config = dump.get("pg_config")
    if not isinstance(config, dict):
        return 0
    for name in ("0", ""):
        group = config.get(name)
        if isinstance(group, dict):
            ranks = str(group.get("ranks", ""))
            return len(re.findall(r"\d+", ranks))
    return 0


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__, file=sys.stderr)
        return 2
    folder = argv[0]
    skipped = []
    ranks = {}
    world = 0
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        number = re.search(r"(\d+)$", name)
        dump = read_dump(path) if number and os.path.isfile(path) else None
        rank = int(number.group(1)) if number else -1
        # Not a dump, a rank no run has, or a second file of a rank (rank_01 beside rank_1).
        if dump is None or rank > _MAX_RANK or rank in ranks:
            skipped.append(name)
            continue
        try:
            record = collectives.record_of_dump(dump, rank)
        except (TypeError, ValueError, AttributeError, KeyError):  # a field of a shape torch never writes
            skipped.append(name)
            continue
        record["time"] = os.path.getmtime(path)  # when torch wrote it: the waits are counted to then
        ranks[rank] = record
        world = max(world, world_size_of(dump))
    for rank in sorted(ranks):
        print(json.dumps(ranks[rank]))
    print(json.dumps({"skipped": skipped, "world_size": min(world, _MAX_RANK + 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
