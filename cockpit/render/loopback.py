"""A local run's rendezvous store, on loopback only.

torchrun's static rendezvous starts node 0's TCPStore with the master address as the address to *connect*
to: the server itself binds every interface (``*:PORT``: torch 2.x, libuv and classic backends alike), so on
a shared login node another user could reach a single-machine run's store through the machine's external
address and read or write it. TCPStore has no bind-address option, but it serves an already listening socket
(``master_listen_fd``), and with ``multi_tenant=True`` every TCPStore of one process that asks for the same
port gets the same server: the static rendezvous asks so. A local node script therefore starts torchrun
through the few lines below: listen on 127.0.0.1:PORT, start the store on that socket and keep it, then run
torchrun's own module (as ``python -m`` would), whose rendezvous finds the store serving its port already.

The ssh and Slurm launchers are untouched: there the other nodes must reach node 0's store.
"""

from __future__ import annotations

from cockpit.render.shell import quote

VARIABLE = "loopback_store"  # the shell variable of the node script that holds the program
# Run as `python -c "$loopback_store" -m torch.distributed.run --master-port=PORT ...`. No single quote in it, so
# that the node script shows it whole between two. A torch without master_listen_fd (older than 2.1) is said, not fatal.
PROGRAM = """import importlib, runpy, socket, sys
module, args = sys.argv[2], sys.argv[3:]
ports = [value for key, _, value in (a.partition("=") for a in args) if key in ("--master-port", "--master_port")]
if ports:
    dist = importlib.import_module("torch.distributed")  # torch of the job python, not cockpit
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", int(ports[-1])))
        sock.listen(128)
    except OSError as exc:
        sys.exit(f"cockpit: the rendezvous store cannot listen on 127.0.0.1:{ports[-1]} ({exc.strerror})")
    try:
        store = dist.TCPStore("127.0.0.1", int(ports[-1]), is_master=True, multi_tenant=True,
                              master_listen_fd=sock.fileno(), wait_for_workers=False)
        sock.detach()  # the store owns the socket now
    except TypeError:
        print("cockpit: this torch cannot listen on loopback only; its store listens on every interface",
              file=sys.stderr, flush=True)
        sock.close()
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def lines() -> list[str]:
    """The node script's lines that define the program (a comment says why)."""
    return ["# One machine: the rendezvous store listens on 127.0.0.1 only (torchrun alone binds every interface).",
            f"{VARIABLE}={quote(PROGRAM.rstrip())}"]


def command(python_word: str, module: str) -> str:
    """``python -c "$loopback_store" -m MODULE``: the first words of the launch, ``python_word`` quoted."""
    return f'{python_word} -c "${VARIABLE}" -m {module}'
