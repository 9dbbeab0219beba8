"""`accelerate launch` for a run on one machine, with its rendezvous store on 127.0.0.1 only.

Shardscope runs this file instead of `python -m accelerate.commands.accelerate_cli` when a script
run stays on this machine. torchrun's agent, inside `accelerate launch`, makes the rendezvous store
(a TCPStore, which has no authentication) with the host 127.0.0.1, but torch binds the store's
port on every interface whatever the host. Handed a socket already bound to 127.0.0.1
(`master_listen_fd`), the store listens there only. Everything else is Accelerate's own CLI.
"""

import socket
import sys

import torch.distributed as dist

POSITIONAL = ("world_size", "is_master", "timeout", "wait_for_workers", "multi_tenant")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


class LoopbackStore(dist.TCPStore):
    def __init__(self, host_name, port, *args, **kwargs):
        kwargs.update(zip(POSITIONAL, args))
        if kwargs.get("is_master") and port and kwargs.get("master_listen_fd") is None and host_name in LOOPBACK_HOSTS:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(2048)
            kwargs["master_listen_fd"] = listener.detach()  # the store owns and closes it
        super().__init__(host_name, port, **kwargs)


# Before accelerate imports torch's rendezvous modules, which take the class by name.
dist.TCPStore = LoopbackStore

from accelerate.commands.accelerate_cli import main

if __name__ == "__main__":
    sys.argv[0] = "accelerate"
    sys.exit(main())
