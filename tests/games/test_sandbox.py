"""games.sandbox: normal programs run, and every attack is contained (checked from outside) and reported.

Each test runs on every backend this machine has. bwrap runs twice: with the audit hook (the
default) and without it, so that bubblewrap alone is shown to contain each attack.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from games.sandbox import Limits, Sandbox, available_backends

# Short limits keep the slow cases (loops, sleeps, bombs) to a second or two each.
LIMITS = Limits(cpu_seconds=1, wall_seconds=3, processes=8, output_bytes=4096)
CONFIGS = [("bwrap", True), ("bwrap", False), ("rlimit", True)]


@pytest.fixture(
    params=[c for c in CONFIGS if c[0] in available_backends()],
    ids=lambda c: c[0] + ("" if c[1] else "-nohook"),
)
def sandbox(request) -> Sandbox:
    backend, hook = request.param
    return Sandbox(LIMITS, backend=backend, audit_hook=hook)


def refused(result, what: str) -> None:
    """With the audit hook, an attack ends the program with the hook's PermissionError naming it."""
    assert result.status == "error", result
    assert "PermissionError: sandbox:" in result.reason and what in result.reason, result.reason


# ---------------------------------------------------------------------------------------------
# Normal programs


def test_prints(sandbox):
    result = sandbox.run("print('hello', 6 * 7)")
    assert (result.status, result.stdout, result.stderr, result.exit_code) == ("ok", "hello 42\n", "", 0)
    assert result.ok and result.reason == "ok" and result.backend == sandbox.backend


def test_reads_stdin(sandbox):
    result = sandbox.run("import sys\nprint(sys.stdin.read()[::-1])", stdin="abc\ndef")
    assert result.stdout == "fed\ncba\n"


def test_raise_is_an_error_with_the_exception_as_reason(sandbox):
    result = sandbox.run("x = 1\nprint('before')\nx / 0")
    assert (result.status, result.exit_code, result.stdout) == ("error", 1, "before\n")
    assert result.reason == "exit code 1: ZeroDivisionError: division by zero"
    assert 'main.py", line 3' in result.stderr  # the traceback points into the program


def test_exit_codes(sandbox):
    assert (sandbox.run("import sys; sys.exit(3)").exit_code, sandbox.run("import sys; sys.exit(3)").reason) == (
        3,
        "exit code 3",
    )
    assert sandbox.run("exit()").ok  # exit() exists although -S skips site


def test_hash_seed_changes_hash(sandbox):
    code = "print(hash('abc'))"
    one, two, one_again = (sandbox.run(code, hash_seed=s).stdout for s in (1, 2, 1))
    assert one != two and one == one_again
    # The value is the base interpreter's own for PYTHONHASHSEED=1, not something made up.
    base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    expected = subprocess.run([base, "-S", "-c", code], env={"PYTHONHASHSEED": "1"}, capture_output=True, check=True)
    assert one == expected.stdout.decode()


def test_standard_library_only_base_interpreter(sandbox):
    result = sandbox.run("import sys, json, fractions\nprint(sys.prefix)\nimport numpy")
    assert result.stdout == os.path.realpath(sys.base_prefix) + "\n" != sys.prefix + "\n"  # not our venv
    assert "ModuleNotFoundError: No module named 'numpy'" in result.reason


def test_fresh_work_dir_deleted_afterwards(sandbox):
    first = sandbox.run("import os\nopen('note.txt', 'w').write('x')\nprint(os.getcwd())")
    workdir = first.stdout.strip()
    assert first.ok and workdir.startswith(os.path.realpath(os.path.dirname(workdir)))
    assert not os.path.exists(workdir)
    assert sandbox.run("import os\nprint(os.path.exists('note.txt'))").stdout == "False\n"


def test_run_many_keeps_order_and_overlaps(sandbox):
    results = sandbox.run_many([f"print({i})" for i in range(6)])
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
    # Two programs that each sleep 0.5 s: with two workers their running times overlap.
    code = "import time\nstart = time.time()\ntime.sleep(0.5)\nprint(start, time.time())"
    spans = [tuple(map(float, r.stdout.split())) for r in sandbox.run_many([code, code], workers=2)]
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans


def test_limits_and_backend_are_checked():
    with pytest.raises(ValueError, match="cpu_seconds must be positive"):
        Limits(cpu_seconds=0)
    with pytest.raises(ValueError, match="audit_hook=False is for"):
        Sandbox(backend="rlimit", audit_hook=False)
    with pytest.raises(ValueError, match="hash_seed"):
        Sandbox(backend="rlimit").run("pass", hash_seed=-1)


def test_auto_picks_bwrap_when_bubblewrap_works():
    bwrap = shutil.which("bwrap")
    # Independent of the module's probe: can bubblewrap start a process here at all?
    works = bwrap is not None and subprocess.run([bwrap, "--ro-bind", "/", "/", "true"], check=False).returncode == 0
    assert ("bwrap" in available_backends()) == works
    assert Sandbox().backend == ("bwrap" if works else "rlimit")


# ---------------------------------------------------------------------------------------------
# Attacks: each is contained (checked from outside) and, with the audit hook, reported


def outside_files(tmp_path: Path) -> dict[str, str]:
    """Files outside the work dir, and a line of each that must not leak."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret is 1234\n")
    files = {"/etc/passwd": "root:", str(secret): "the secret is 1234", __file__: "games.sandbox: normal programs"}
    home = Path.home()
    for name in (".bashrc", ".profile", ".gitconfig"):
        if (home / name).is_file() and os.access(home / name, os.R_OK) and (home / name).read_text().strip():
            files[str(home / name)] = (home / name).read_text().strip().splitlines()[0]
            break
    return files


def test_cannot_read_outside_the_work_dir(sandbox, tmp_path):
    for path, line in outside_files(tmp_path).items():
        result = sandbox.run(f"print(open({path!r}).read())")
        assert line not in result.stdout + result.stderr, path
        assert result.status == "error", (path, result)
        if sandbox.audit_hook:
            refused(result, "open of")
    result = sandbox.run(f"import os\nprint(os.listdir({str(tmp_path)!r}))")
    assert "secret.txt" not in result.stdout and result.status == "error"


def test_cannot_write_outside_the_work_dir(sandbox, tmp_path):
    for target in (tmp_path / "pwned.txt", Path(f"/tmp/coevo-pwned-{uuid.uuid4().hex}")):
        result = sandbox.run(f"open({str(target)!r}, 'w').write('pwned')\nprint('wrote')")
        assert not target.exists(), target
        if sandbox.audit_hook:
            refused(result, "open of")
    # Under bubblewrap alone, /tmp is the sandbox's own tmpfs: the write succeeds there and vanishes.


def test_no_network(sandbox):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.3)
        port = listener.getsockname()[1]
        result = sandbox.run(
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\ns.sendall(b'hi')"
        )
        with pytest.raises(TimeoutError):
            listener.accept()
    assert result.status == "error"
    if sandbox.audit_hook:
        refused(result, "socket.")
    else:
        assert "ConnectionRefusedError" in result.reason  # a network namespace of its own, with nothing in it


def sandbox_processes(marker: str) -> list[str]:
    """Command lines of live processes that mention ``marker`` (a run's work dir)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(cmdline)
    return found


def test_fork_bomb_is_contained(sandbox):
    code = "import os, sys\nprint(os.getcwd(), flush=True)\nwhile True:\n    os.fork()"
    result = sandbox.run(code)
    workdir = result.stdout.splitlines()[0]
    assert result.status in ("error", "timeout") and result.wall_seconds < LIMITS.wall_seconds + 1, result
    time.sleep(0.1)
    assert sandbox_processes(workdir) == []
    if sandbox.audit_hook:
        refused(result, "os.fork")
    assert sandbox.run("print('still here')").ok


def test_process_limit_binds(sandbox):
    threads = "import threading, time\nts = [threading.Thread(target=time.sleep, args=(0.3,)) for _ in range({n})]\n"
    threads += "[t.start() for t in ts]\nprint('started')"
    assert sandbox.run(threads.format(n=LIMITS.processes - 1)).ok  # the main thread makes `processes`
    result = sandbox.run(threads.format(n=LIMITS.processes + 4))
    assert result.reason == "exit code 1: RuntimeError: can't start new thread", result


def test_infinite_loop_times_out_on_cpu(sandbox):
    result = sandbox.run("while True:\n    pass")
    assert result.status == "timeout" and "CPU" in result.reason, result
    assert result.exit_code is None


def test_sleep_times_out_on_wall_time(sandbox):
    quick = Sandbox(replace(LIMITS, wall_seconds=1.0), backend=sandbox.backend, audit_hook=sandbox.audit_hook)
    result = quick.run("import time\ntime.sleep(60)")
    assert (result.status, result.reason, result.exit_code) == ("timeout", "timed out after 1.0 s of wall time", None)
    assert 1.0 <= result.wall_seconds < 2.0


def test_memory_bomb(sandbox):
    for code in ("x = bytearray(2**40)", "a = []\nwhile True:\n    a.append(bytearray(10**7))"):
        result = sandbox.run(code)
        assert result.status == "memory" and "out of memory" in result.reason, result


def test_huge_output_is_capped(sandbox):
    floods = ("print('x' * 10**6)", "while True:\n    print('y' * 100)", "import sys\nsys.stderr.write('z' * 10**6)")
    for code in floods:
        result = sandbox.run(code)
        assert result.status == "output_limit", result
        assert result.reason == "exceeded the output limit (4096 bytes)"
        assert len(result.stdout.encode()) <= LIMITS.output_bytes and len(result.stderr.encode()) <= LIMITS.output_bytes
    assert sandbox.run("print('x' * 10**6)").stdout.startswith("x" * 4000)
    # Files the program writes are capped too.
    assert sandbox.run("open('big.txt', 'w').write('z' * 10**6)").status == "output_limit"


ESCAPES = {
    "ctypes": "import ctypes\nctypes.CDLL(None).system(b'touch {target}')",
    "os.system": "import os\nos.system('touch {target}')",
    "subprocess": "import subprocess\nsubprocess.run(['touch', '{target}'])",
    "os.execv": "import os\nos.execv('/usr/bin/touch', ['touch', '{target}'])",
    "os.posix_spawn": "import os\nos.waitpid(os.posix_spawn('/usr/bin/touch', ['touch', '{target}'], {{}}), 0)",
}


@pytest.mark.parametrize("trick", ESCAPES)
def test_no_command_runs_outside(sandbox, tmp_path, trick):
    targets = [tmp_path / "pwned", Path(f"/tmp/coevo-pwned-{uuid.uuid4().hex}")]
    for target in targets:
        result = sandbox.run(ESCAPES[trick].format(target=target))
        assert not target.exists(), (trick, target, result)
        if sandbox.audit_hook:
            assert result.status == "error" and "PermissionError: sandbox:" in result.reason, result


def test_environment_is_scrubbed(sandbox, monkeypatch):
    monkeypatch.setenv("COEVO_TEST_SECRET", "hunter2-" + uuid.uuid4().hex)
    secret = os.environ["COEVO_TEST_SECRET"]
    result = sandbox.run("import os\nprint(sorted(os.environ))")
    allowed = {"PATH", "LANG", "HOME", "PYTHONHASHSEED", "MALLOC_ARENA_MAX", "PWD"}  # bwrap adds PWD
    assert set(eval(result.stdout)) <= allowed, result.stdout
    # Every environ in the sandbox's /proc: its parent's, and ours by pid (our pid is not its to see).
    snoop = (
        "import os\nfound = []\n"
        "for pid in [os.getppid(), int(input())] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    try:\n        found.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\n"
        "    except OSError as e:\n        found.append(repr(e))\n"
        "print(found)"
    )
    result = sandbox.run(snoop, stdin=f"{os.getpid()}\n")
    assert secret not in result.stdout + result.stderr
    if sandbox.audit_hook:
        refused(result, "is not allowed")


def test_audit_hook_resists_tampering(sandbox):
    if not sandbox.audit_hook:
        pytest.skip("no audit hook in this configuration")
    tricks = [
        "import sys\nsys._getframe(1).f_globals['_audit'].__defaults__ = None",
        "import sys\nsys._getframe(1).f_globals['_audit'].__code__ = (lambda *a: None).__code__",
        "import sys\nsys._getframe(1).f_globals['_audit'].__defaults__[0][4]['open'] = ((), False)",
        "import gc\ngc.get_objects()",
        "import sys\nsys.settrace(lambda *a: None)",
        "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (100, 100))",
        "import os\nos.symlink('/etc/passwd', 'link')\nprint(open('link').read())",
    ]
    for code in tricks:
        result = sandbox.run(code)
        assert result.status == "error" and "root:" not in result.stdout, (code, result)
