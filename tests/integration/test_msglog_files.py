"""A running `ms_msglog serve` whose files are tampered with (seed 004 1.1): the active
message file deleted under it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from raims_node.msglog import paths
from tests.integration.msglog_harness import CABAL, Cluster


def test_serve_goes_on_in_a_new_file_when_its_active_file_is_deleted(tmp_path: Path) -> None:
    """Before, every later line went into the deleted inode: logged and counted, read by
    no one, until a roll-over (64 MiB later by default)."""
    c = Cluster(tmp_path, ["source"])
    try:
        c.start("n1")
        c.send("n1", 5, "a")
        c.wait_states(["n1"], ["n1"])
        d = paths.log_dir(c.root, CABAL, "n1")
        os.unlink(d / os.readlink(d / "n1.msg"))
        deadline = time.monotonic() + 10
        while "deleted under the running log" not in c.out("n1"):  # the node's tick (50 ms)
            assert time.monotonic() < deadline, c.out("n1")[-2000:]
            time.sleep(0.02)
        c.send("n1", 5, "b")
        c.wait_states(["n1"], ["n1"])
        assert [data for _, _, data in c.log_messages("n1")] == [b"n1b-%d" % i for i in range(5, 10)]
    finally:
        c.stop_all()
