"""PyTorch's own Flight Recorder dumps as the engine's flight records, for ``shardscope runs
diagnose FOLDER``: the files torch writes, one per rank (``TORCH_FR_DUMP_TEMP_FILE`` + the rank on a
collective timeout, or what ``torch._C._distributed_c10d._dump_fr_trace`` returns), named
``<prefix><rank>`` as torchfrtrace takes them, from any run (Shardscope's or not; NCCL or Gloo).

Prints one flight record (JSON, engine/protocol/flight_record.h) per line, one per rank found, and
then a line ``{"skipped": [...]}`` naming the files that are not such dumps. Standard library only
(a dump is a pickle of plain dicts and lists): runs as a file, without torch or this package.

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


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__, file=sys.stderr)
        return 2
    folder = argv[0]
    skipped = []
    ranks = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        number = re.search(r"(\d+)$", name)
        dump = read_dump(path) if number and os.path.isfile(path) else None
        if dump is None:
            skipped.append(name)
            continue
        rank = int(number.group(1))
        if rank in ranks:  # two files of one rank (two prefixes): the folder is not one run's
            skipped.append(name)
            continue
        ranks[rank] = collectives.record_of_dump(dump, rank)
        ranks[rank]["time"] = os.path.getmtime(path)  # when torch wrote it: the waits are counted to then
    for rank in sorted(ranks):
        print(json.dumps(ranks[rank]))
    print(json.dumps({"skipped": skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
