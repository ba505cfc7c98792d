"""games.task_forge.sandbox cleanup: whatever a program does to its work dir, ``Sandbox.run`` returns its
result, no work dir is left, and nothing outside the work dir is followed, changed or deleted.

Each program runs on every backend this machine has (the ``sandbox`` fixture of test_sandbox).
Root ignores file permissions, so the removal function also runs directly, as an unprivileged uid,
on trees that uid built: what a program leaves behind when the trainer does not run as root.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

import games.task_forge.sandbox as sandbox_module
from games.task_forge.sandbox import Sandbox, available_backends
from tests.games.test_sandbox import LIMITS, sandbox, temp_dir, work_dirs  # noqa: F401 (fixtures)

# Deeper than Python 3.11's recursive shutil.rmtree goes (about 1,000 levels), and longer than
# PATH_MAX (4,096 bytes) as a path: "d/" * 2,100.
DEPTH = 2_100
UNPRIVILEGED_UID = 0x3FFF_FFFE  # below every uid _run_uid hands out, and no real user's
OUTSIDER_UID = 0x3FFF_FFFF

# What a program may leave: each builds it in its work dir, then ends normally.
PROGRAMS = {
    "deep": f"os.mkdir('d')\nfor _ in range({DEPTH}):\n    os.mkdir('t')\n    os.rename('d', 't/d')\n    os.rename('t', 'd')",
    "locked": "os.makedirs('a/b/c')\nopen('a/b/c/f', 'w').close()\n"
    "for path in ('a/b/c', 'a/b', 'a', '.'):\n    os.chmod(path, 0)",
    "read_only": "os.makedirs('r/s')\nfor path in ('r/f', 'r/s/f'):\n    open(path, 'w').close()\n    os.chmod(path, 0o444)\n"
    "for path in ('r/s', 'r', '.'):\n    os.chmod(path, 0o555)",
    "symlinks": "os.mkdir('links')\nfor target, name in [({outside!r}, 'out'), ({outside!r} + '/file', 'file'), ('/', 'root'),\n"
    "        ('loop2', 'loop1'), ('loop1', 'loop2'), ('.', 'self'), ('..', 'up')]:\n"
    "    os.symlink(target, 'links/' + name)",
}


@pytest.fixture
def outside(tmp_path) -> Path:
    """A dir outside the work dir for links to point at; ``intact`` checks nothing in it changed."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("canary")
    (tmp_path / "dir").chmod(0o500)
    (tmp_path / "file").chmod(0o400)
    return tmp_path


def intact(outside: Path) -> None:
    assert (outside / "file").read_text() == "canary"
    assert [stat.S_IMODE((outside / name).lstat().st_mode) for name in ("dir", "file")] == [0o500, 0o400]


@pytest.mark.parametrize("program", PROGRAMS)
def test_whatever_a_program_leaves_is_removed(sandbox, temp_dir, outside, program):
    slow = Sandbox(replace(LIMITS, cpu_seconds=10, wall_seconds=20), backend=sandbox.backend, audit_hook=sandbox.audit_hook)
    result = slow.run("import os\n" + PROGRAMS[program].format(outside=str(outside)))
    if program == "symlinks" and sandbox.audit_hook:
        assert "PermissionError: sandbox: os.symlink" in result.reason  # the hook allows no symlinks at all
    else:
        assert result.ok, result
    assert work_dirs(temp_dir) == []
    intact(outside)


# A child that outlives the program and keeps a file open and creating files in the work dir:
# only bubblewrap lets a program fork at all (the audit hook refuses), so this runs without the hook.
SURVIVOR = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    held = open('held', 'w')\n"
    "    for i in range(10**9):\n"
    "        open(f'again{{i % 100}}', 'w').close()\n"
    "while not os.path.exists('again1'):\n"
    "    time.sleep(0.01)\n"
    "{then}"
)


@pytest.mark.parametrize("then", ["", "time.sleep(60)"], ids=["exits", "times_out"])
def test_a_surviving_child_neither_keeps_the_dir_nor_outlives_the_run(temp_dir, then):
    if "bwrap" not in available_backends():
        pytest.skip("no bubblewrap here")
    quick = Sandbox(replace(LIMITS, wall_seconds=1.0), backend="bwrap", audit_hook=False)
    for _ in range(3):  # the child is still being killed while we remove the dir: a race, so try it a few times
        result = quick.run(SURVIVOR.format(then=then))
        assert result.status == ("ok" if not then else "timeout"), result
        assert work_dirs(temp_dir) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="without root every run shares our uid: there is no uid to kill by")
def test_as_root_every_process_of_the_runs_uid_dies_before_its_dir_goes(sandbox, temp_dir, monkeypatch):
    """A process with the run's uid that the process group kill cannot reach (here: started by us, in
    a session of its own, holding a file open and re-creating files in the work dir) is killed."""
    monkeypatch.setattr(sandbox_module, "_run_uid", lambda: contextlib.nullcontext(OUTSIDER_UID))
    # `command exec`: a failed redirection (the dir not yet ours, or gone) must not end the shell.
    script = f'cd {temp_dir}; while :; do for d in coevo-sandbox-*; do [ -w "$d" ] && command exec 3>>"$d/held" && : >"$d/again"; done 2>/dev/null; done'
    outsider = subprocess.Popen(["/bin/sh", "-c", script], user=OUTSIDER_UID, group=OUTSIDER_UID, start_new_session=True)
    try:
        code = "import os, time\nwhile not os.path.exists('held'):\n    time.sleep(0.01)\nprint('seen')"
        result = sandbox.run(code)
        assert result.stdout == "seen\n", result
        assert outsider.wait(timeout=5) == -9
        assert work_dirs(temp_dir) == []
    finally:
        outsider.kill()
        outsider.wait()


# ---------------------------------------------------------------------------------------------
# The removal function itself, on trees built by the uid that removes them


def build_tree(top: Path, outside: Path) -> None:
    """Everything of PROGRAMS at once, with the top dir itself locked last."""
    fd = os.open(top, os.O_RDONLY)
    os.mkdir("d", dir_fd=fd)
    for _ in range(DEPTH):
        os.mkdir("t", dir_fd=fd)
        os.rename("d", "t/d", src_dir_fd=fd, dst_dir_fd=fd)
        os.rename("t", "d", src_dir_fd=fd, dst_dir_fd=fd)
    os.close(fd)
    (top / "a" / "b" / "c").mkdir(parents=True)
    (top / "a" / "b" / "c" / "f").touch()
    (top / "r" / "s").mkdir(parents=True)
    for path in (top / "r" / "f", top / "r" / "s" / "f"):
        path.touch()
        path.chmod(0o444)
    (top / "links").mkdir()
    for target, name in [(outside, "out"), (outside / "file", "file"), ("/", "root"), ("loop2", "loop1"),
                         ("loop1", "loop2"), (".", "self"), ("..", "up")]:  # fmt: skip
        (top / "links" / name).symlink_to(target)
    for path in (top / "r" / "s", top / "r"):
        path.chmod(0o555)
    for path in (top / "a" / "b" / "c", top / "a" / "b", top / "a", top):
        path.chmod(0)


def remove_built_tree(base: str) -> None:
    top, outside = Path(base) / "top", Path(base) / "outside"
    top.mkdir()
    outside.mkdir()
    (outside / "dir").mkdir()
    (outside / "file").write_text("canary")
    (outside / "dir").chmod(0o500)
    (outside / "file").chmod(0o400)
    build_tree(top, outside)
    sandbox_module._remove_tree(str(top))
    assert not os.path.lexists(top)
    intact(outside)
    (outside / "link").symlink_to(outside / "dir")  # a work dir swapped for a link: only the link goes
    sandbox_module._remove_tree(str(outside / "link"))
    assert not os.path.lexists(outside / "link")
    intact(outside)


def in_child(fn: Callable[[str], None], base: str, uid: int | None) -> None:
    """``fn(base)`` in a forked child, as ``uid`` if given; what it raised comes back as a failed assert."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        report = b"ok"
        try:
            os.close(read)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            fn(base)
        except BaseException:  # noqa: BLE001 - everything goes back to the parent
            report = traceback.format_exc().encode()
        finally:
            os.write(write, report)
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read().decode()
    os.waitpid(pid, 0)
    assert report == "ok", report


@pytest.mark.parametrize("who", ["us", "unprivileged"])
def test_remove_tree_removes_what_a_program_can_build_and_follows_no_link(who):
    if who == "unprivileged" and os.geteuid() != 0:
        pytest.skip("we are not root: 'us' is the unprivileged case")
    base = tempfile.mkdtemp(prefix="coevo-test-")
    uid = UNPRIVILEGED_UID if who == "unprivileged" else None
    try:
        if uid is not None:
            os.chown(base, uid, uid)
        start = time.perf_counter()
        in_child(remove_built_tree, base, uid)
        assert time.perf_counter() - start < 30
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", base], check=True)
