"""Run-directory writes: atomic, a full disk named with its file, one trainer per directory."""

import errno
import os
import subprocess
import sys

import pytest
import torch

from marl.rundir import RunDirBusy, RunLock, save_tensors, write_text


def full_disk_at(path):
    """Make the next write of ``path`` land on /dev/full, which answers every write with ENOSPC."""
    os.symlink("/dev/full", path.with_name(f".{path.name}.tmp"))


@pytest.mark.parametrize("write", [lambda p: write_text(p, "x" * 10**5), lambda p: save_tensors(p, {"w": torch.ones(10**5)})])
def test_a_full_disk_is_an_oserror_naming_the_file_and_the_old_file_stays(tmp_path, write):
    target = tmp_path / "state.pt"
    target.write_text("old")
    full_disk_at(target)
    with pytest.raises(OSError) as err:
        write(target)
    assert (err.value.errno, err.value.filename) == (errno.ENOSPC, str(target))
    assert "No space left on device" in str(err.value)
    assert target.read_text() == "old", "an atomic write leaves the old file whole"


def test_a_second_trainer_on_the_same_run_dir_is_refused_and_the_lock_dies_with_its_holder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from marl.rundir import RunLock\n"
         "with RunLock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunDirBusy, match=f"another process \\(pid {holder.pid}\\)"):
            with RunLock(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path):  # the kernel dropped a SIGKILLed holder's lock
        assert (tmp_path / ".lock").read_text() == str(os.getpid())
