"""Where an sbus bus lives and how its socket is bound (bridges/ipc.py's docstring:
`path`, the named buses, stale paths).
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path


def socket_dir() -> Path:
    """Where named buses (and the endpoints files) live on this host for this user."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "raims"
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"raims-{os.getuid()}"


def socket_path(name: str) -> Path:
    return socket_dir() / f"{name}.sock"


def bind_socket(path: Path, mode: int) -> socket.socket:
    """A listening SOCK_SEQPACKET socket at `path` (module docstring: stale paths)."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        probe.setblocking(False)  # a live server's full backlog: EAGAIN, never a wait
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink()  # left by a daemon that is gone
        except BlockingIOError:
            raise OSError(errno.EADDRINUSE, f"{path}: another server is listening (busy)") from None
        else:
            raise OSError(errno.EADDRINUSE, f"{path}: another server is listening")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.bind(str(path))
        os.chmod(path, mode)
        sock.listen(socket.SOMAXCONN)  # capped by net.core.somaxconn, as Go's (nats-server) listen
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
