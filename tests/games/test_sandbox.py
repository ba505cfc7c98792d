"""games.task_forge.sandbox: normal programs run, and every attack is contained (checked from outside) and reported.

Each test runs on every backend this machine has. bwrap runs twice: with the audit hook (the
default) and without it, so that bubblewrap alone is shown to contain each attack.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import games
import games.task_forge.sandbox as sandbox_module
from games.task_forge.sandbox import FALLBACK_WARNING, Limits, Sandbox, SandboxUnavailable, available_backends

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


def test_auto_is_bwrap_where_bubblewrap_works():
    bwrap = shutil.which("bwrap")
    # Independent of the module's probe: can bubblewrap start a process here at all?
    works = bwrap is not None and subprocess.run([bwrap, "--ro-bind", "/", "/", "true"], check=False).returncode == 0
    assert ("bwrap" in available_backends()) == works
    if works:
        assert Sandbox().backend == Sandbox(backend="auto").backend == "bwrap"


@pytest.fixture
def fresh_probe():
    """The bubblewrap probe runs again under this test's PATH, and again afterwards under the real one."""
    sandbox_module._bwrap_problem.cache_clear()
    yield
    sandbox_module._bwrap_problem.cache_clear()


def fake_bwrap(directory: Path) -> None:
    """A bwrap that fails the way it does where unprivileged user namespaces are forbidden."""
    script = directory / "bwrap"
    script.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    script.chmod(0o755)


@pytest.mark.parametrize("bwrap", ["missing", "broken"])
def test_without_working_bubblewrap_there_is_no_silent_fallback(bwrap, tmp_path, monkeypatch, fresh_probe):
    if bwrap == "broken":
        fake_bwrap(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin" if bwrap == "broken" else str(tmp_path))
    for backend in ("auto", "bwrap"):
        with pytest.raises(SandboxUnavailable) as raised:
            Sandbox(backend=backend)
        message = str(raised.value)
        # One sentence: what is missing, how to install it, how to opt into the fallback.
        assert message.count(". ") == 0 and message.endswith(".") and "\n" not in message, message
        assert "`make system-deps`" in message and "bubblewrap" in message and 'backend="rlimit"' in message
        expected = "No permissions to create new namespace" if bwrap == "broken" else "bwrap is not on PATH"
        assert expected in message, message
    assert Sandbox(backend="rlimit").run("print(1)").stdout == "1\n"  # the explicit opt-in still runs


def test_the_rlimit_fallback_warns_once_per_process_saying_what_it_does_not_contain():
    # A fresh interpreter, with every warning shown each time it is raised: the module itself must
    # keep it to one, over several runs, run_many's threads and two Sandbox objects.
    script = (
        "from games.task_forge.sandbox import Sandbox\n"
        "a, b = Sandbox(backend='rlimit'), Sandbox(backend='rlimit')\n"
        "print('constructed', flush=True)\n"
        "assert a.run('print(1)').ok and b.run('print(2)').ok\n"
        "assert all(r.ok for r in a.run_many(['pass'] * 4, workers=4))\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", script], capture_output=True, text=True, check=False,
        cwd=Path(__file__).parents[2], timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "constructed\n"  # warned at run time, not before
    assert done.stderr.count("SandboxFallbackWarning") == 1 and FALLBACK_WARNING in done.stderr, done.stderr
    for gap in ("not a security boundary", "audit hook", "no filesystem, network or PID namespace", "os.mknod",
                "outlives the run", "`make system-deps`"):  # fmt: skip
        assert gap in FALLBACK_WARNING, gap


# ---------------------------------------------------------------------------------------------
# Attacks: each is contained (checked from outside) and, with the audit hook, reported


def outside_files(tmp_path: Path) -> dict[str, str]:
    """Files outside the work dir, and a line of each that must not leak."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret is 1234\n")
    files = {"/etc/passwd": "root:", str(secret): "the secret is 1234", __file__: "games.task_forge.sandbox: normal programs"}
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
    # _posixsubprocess under another name: the name's last part is what picks its native code
    "alias_posixsubprocess": "import importlib.util, os, sys\n"
    "dynload = [p for p in sys.path if p.endswith('lib-dynload')][0]\n"
    "so = [n for n in os.listdir(dynload) if n.startswith('_posixsubprocess')][0]\n"
    "spec = importlib.util.spec_from_file_location('x._posixsubprocess', dynload + '/' + so)\n"
    "fork_exec = importlib.util.module_from_spec(spec).fork_exec\nr, w = os.pipe()\n"
    "fork_exec([b'touch', b'{target}'], [b'/usr/bin/touch'], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w,\n"
    "          True, True, -1, None, None, None, -1, None, True)\nos.read(r, 100)\nimport time\ntime.sleep(0.5)",
    # audit hooks are per interpreter: a subinterpreter would run without ours
    "subinterpreter": "import _xxsubinterpreters as interpreters\n"
    "interpreters.run_string(interpreters.create(), \"import os; os.system('touch {target}')\")",
    "testcapi_subinterpreter": "import _testcapi\n_testcapi.run_in_subinterp(\"import os; os.system('touch {target}')\")",
}


@pytest.mark.parametrize("trick", ESCAPES)
def test_no_command_runs_outside(sandbox, tmp_path, trick):
    targets = [tmp_path / "pwned", Path(f"/tmp/coevo-pwned-{uuid.uuid4().hex}")]
    for target in targets:
        result = sandbox.run(ESCAPES[trick].format(target=target))
        assert not target.exists(), (trick, target, result)
        if sandbox.audit_hook:
            assert result.status == "error" and "PermissionError: sandbox:" in result.reason, result


def test_native_code_loads_only_from_the_standard_library(sandbox):
    """A program may write an extension module into its work dir (here: a copy of the stdlib's
    _json); loading it would run native code the audit hook never sees."""
    code = (
        "import importlib.util, os, sys\n"
        "dynload = [p for p in sys.path if p.endswith('lib-dynload')][0]\n"
        "so = [n for n in os.listdir(dynload) if n.startswith('_json.')][0]\n"
        "os.mkdir('mine')\nopen('mine/' + so, 'wb').write(open(dynload + '/' + so, 'rb').read())\n"
        "spec = importlib.util.spec_from_file_location('mine._json', 'mine/' + so)\n"
        "print(importlib.util.module_from_spec(spec))"
    )
    roomy = Sandbox(replace(LIMITS, output_bytes=8 * 2**20), backend=sandbox.backend, audit_hook=sandbox.audit_hook)
    result = roomy.run(code)  # room for the copy: RLIMIT_FSIZE caps every file the program writes
    if not any(name.startswith("_json.") for name in os.listdir(os.path.join(_STDLIB, "lib-dynload"))):
        pytest.skip("_json is built into this interpreter")
    if sandbox.audit_hook:
        refused(result, "importing mine._json")
    else:
        assert result.ok and "mine._json" in result.stdout, result  # bubblewrap does not stop it, nor need to


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


# ---------------------------------------------------------------------------------------------
# fd-relative paths: the audit hook judged a relative path from the cwd, while dir_fd= made the
# kernel resolve it from another directory. Each trick keeps an fd, then reaches outside with it.


@pytest.fixture
def outside():
    """A world-readable secret beside the work dirs (in /tmp, where the run's uid may read it) and
    a name there that no run may create; both removed afterwards."""
    secret = Path(tempfile.gettempdir()) / f"coevo-secret-{uuid.uuid4().hex}"
    secret.write_text("the secret is 5678\n")
    secret.chmod(0o644)
    target = Path(tempfile.gettempdir()) / f"coevo-pwned-{uuid.uuid4().hex}"
    yield secret, target
    for path in (secret, target):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink(missing_ok=True)


_STDLIB = os.path.dirname(os.__file__)
# From a cwd this deep in the work dir, "../" * depth of the stdlib still lands inside the work dir.
_DEEP = "/".join("d" * (_STDLIB.count("/") + 2))
_UP = "../" * _STDLIB.count("/")
# The stdlib as the program reaches it: through the prelude's fd where its uid cannot by path.
_LIB = "import string\nlib = os.open(os.path.dirname(string.__file__), os.O_RDONLY)"
FD_TRICKS = {
    "open_read": "os.chdir('sub')\nprint(os.read(os.open('../{secret}', os.O_RDONLY, dir_fd=work), 100))",
    "open_create": "os.chdir('sub')\nos.close(os.open('../{target}', os.O_WRONLY | os.O_CREAT, dir_fd=work))",
    "rename_dst_dir_fd": "os.chdir('sub')\nopen('x', 'w').close()\nos.rename('x', '../{target}', dst_dir_fd=work)",
    "mkdir_dir_fd": "os.chdir('sub')\nos.mkdir('../{target}', dir_fd=work)",
    "link_src_dir_fd": "os.chdir('sub')\nos.link('../{secret}', 'copy', src_dir_fd=work)\nprint(open('copy').read())",
    "symlink_in_fd_dir": "os.symlink('/tmp', 'sub/l')\nsub = os.open('sub', os.O_RDONLY)\n"
    "print(os.read(os.open('l/{secret}', os.O_RDONLY, dir_fd=sub), 100))",
    "fd_on_stdlib_then_up": f"os.makedirs({_DEEP!r})\nos.chdir({_DEEP!r})\n{_LIB}\n"
    f"print(os.read(os.open({_UP!r} + 'tmp/{{secret}}', os.O_RDONLY, dir_fd=lib), 100))",
    "listdir_fd": f"os.makedirs({_DEEP!r})\nos.chdir({_DEEP!r})\n{_LIB}\n"
    f"print(os.listdir(os.open({_UP!r} + 'tmp', os.O_RDONLY, dir_fd=lib)))",
    "scandir_fd": "tmp = os.open('/tmp', os.O_RDONLY)\nprint([e.name for e in os.scandir(tmp)])",
    "o_path_fd": "tmp = os.open('/tmp', os.O_PATH)\nprint(os.read(os.open('{secret}', os.O_RDONLY, dir_fd=tmp), 100))",
    "fwalk": f"os.makedirs({_DEEP!r})\nos.chdir({_DEEP!r})\n{_LIB}\n"
    f"print([files for _, _, files, _ in os.fwalk({_UP!r} + 'tmp', dir_fd=lib)])",
    "fchdir": "tmp = os.open('/tmp', os.O_RDONLY)\nos.fchdir(tmp)\nprint(open('{secret}').read())",
    "fchdir_stdlib_fd": f"{_LIB}\nos.fchdir(lib)\nprint(open({_UP!r} + 'tmp/{{secret}}').read())",
}


@pytest.mark.parametrize("trick", FD_TRICKS)
def test_fd_relative_paths_cannot_leave_the_work_dir(sandbox, outside, trick):
    secret, target = outside
    code = "import os\nwork = os.open('.', os.O_RDONLY)\nos.mkdir('sub')\n"
    code += FD_TRICKS[trick].format(secret=secret.name, target=target.name)
    result = sandbox.run(code)
    assert "the secret is 5678" not in result.stdout + result.stderr, (trick, result)
    assert secret.name not in result.stdout, (trick, result)  # not even listed
    assert not target.exists(), (trick, result)
    if sandbox.audit_hook:
        refused(result, "")


def test_the_preludes_own_stdlib_fd_is_no_dir_fd_for_the_program(sandbox):
    """As root, where the run's uid cannot reach the stdlib (pyenv under /root), the prelude keeps
    an fd on it; used as a dir_fd it must reach nothing the hook would refuse by path."""
    readme = Path(_STDLIB) / "site-packages" / "README.txt"  # outside what the hook lets a program read
    if not readme.is_file():
        pytest.skip(f"no {readme} to try to read")
    line = readme.read_text().splitlines()[0]
    relative = [os.path.relpath(readme, base) for base in (_STDLIB, sys.base_prefix, os.path.dirname(sys.base_prefix))]
    code = (
        "import os, stat\n"
        "dirs = [fd for fd in range(64) if os.path.exists(f'/proc/self/fd/{fd}') and stat.S_ISDIR(os.fstat(fd).st_mode)]\n"
        "print('dir fds', dirs, flush=True)\n"
        "for fd in dirs:\n"
        f"    for path in {relative!r} + ['.', 'site-packages']:\n"
        "        try:\n"
        "            got = os.open(path, os.O_RDONLY, dir_fd=fd)\n"
        "        except OSError as e:\n"
        "            print(fd, type(e).__name__, 'sandbox:' in str(e))\n"
        "            continue\n"
        "        print(fd, path, os.read(got, 200) if not stat.S_ISDIR(os.fstat(got).st_mode) else os.listdir(got))\n"
        "    try:\n"
        "        os.fchdir(fd)\n"
        "        print(open('site-packages/README.txt').read())\n"
        "    except OSError as e:\n"
        "        print(fd, 'fchdir', type(e).__name__, 'sandbox:' in str(e))\n"
    )
    result = sandbox.run(code)
    assert line not in result.stdout + result.stderr, result.stdout
    assert "README.txt" not in result.stdout, result.stdout  # site-packages never listed
    if sandbox.audit_hook and sandbox.backend == "rlimit" and os.geteuid() == 0 and not _reachable_by_others(_STDLIB):
        assert result.stdout.startswith("dir fds [") and "dir fds []" not in result.stdout  # the case this is about
        assert "PermissionError True" in result.stdout  # refused by the hook, not by the kernel


def _reachable_by_others(path: str) -> bool:
    """Whether a user other than the owner may enter every directory down to ``path``."""
    parts = Path(path).resolve().parts
    return all(os.stat(os.path.join(*parts[: i + 1])).st_mode & 0o001 for i in range(len(parts)))


# ---------------------------------------------------------------------------------------------
# Any text is a valid program or stdin: the host never raises on it


# Hypothesis leaves out lone surrogates (category Cs) unless asked; a model's str may hold them.
any_text = st.lists(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=40).map("".join)
STATUSES = {"ok", "error", "timeout", "memory", "output_limit", "killed"}  # all but "sandbox_error"


@settings(max_examples=12)
@given(code=any_text, stdin=any_text)
def test_any_text_as_code_and_stdin_comes_back_as_a_result(code, stdin):
    for backend in available_backends():
        result = Sandbox(LIMITS, backend=backend).run(code, stdin=stdin)
        assert result.status in STATUSES, result
        if any("\ud800" <= c <= "\udfff" for c in code):  # Python source cannot hold one: the program fails
            assert result.status == "error" and "surrogates not allowed" in result.reason, result


@settings(max_examples=12)
@given(stdin=any_text)
def test_stdin_reaches_the_program_byte_for_byte(stdin):
    # surrogatepass: a lone surrogate arrives as its three UTF-8-style bytes, not replaced or dropped
    echo = "import sys\nsys.stdout.write(sys.stdin.buffer.read().hex())"
    for backend in available_backends():
        result = Sandbox(LIMITS, backend=backend).run(echo, stdin=stdin)
        assert result.ok and result.stdout == stdin.encode("utf-8", "surrogatepass").hex(), result


def test_a_lone_surrogate_is_the_programs_failure_not_ours(sandbox):
    result = sandbox.run("s = '\ud800'\nprint(len(s))", stdin="\udfff")
    assert result.status == "error" and "surrogates not allowed" in result.reason, result
    # stdin's bytes as they came: Python reads undecodable ones as surrogateescapes (C.UTF-8 locale)
    result = sandbox.run("import sys\nprint(ascii(sys.stdin.read()))", stdin="x\ud800")
    assert result.stdout == "'x\\udced\\udca0\\udc80'\n", result


# ---------------------------------------------------------------------------------------------
# A failure of the sandbox itself is a result, never an exception


@pytest.fixture
def temp_dir(monkeypatch, tmp_path_factory) -> Path:
    """A temp dir of this test's own for the sandbox's files, so that "no work dir left" is exact."""
    tmp_path_factory.getbasetemp()  # pytest's own temp dirs stay where they are
    path = Path(tempfile.mkdtemp(prefix="coevo-test-"))
    path.chmod(0o755)  # as root, each run's own uid must reach its work dir
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    yield path
    monkeypatch.undo()  # a test's patched Popen would stop rm
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=True)


def work_dirs(temp_dir: Path) -> list[Path]:
    return sorted(temp_dir.glob("coevo-sandbox-*"))


def failing(error: OSError, after=None):
    """A stand-in that raises ``error``, after calling ``after`` (the real function) if given."""

    def fail(*args, **kwargs):
        if after is not None:
            after(*args, **kwargs)
        raise error

    return fail


MACHINERY_FAILURES = {  # (what to patch, the error, the original to call first or None)
    "mkdtemp": (tempfile, "mkdtemp", OSError(errno.ENOSPC, "No space left on device"), None),
    "popen_emfile": (subprocess, "Popen", OSError(errno.EMFILE, "Too many open files"), None),
    "popen_eagain": (subprocess, "Popen", BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"), None),
    "pidfd_open": (os, "pidfd_open", OSError(errno.EMFILE, "Too many open files"), None),
    "wait4": (os, "wait4", ChildProcessError(errno.ECHILD, "No child processes"), os.wait4),
    "read_output": (sandbox_module, "_read_head", OSError(errno.EIO, "Input/output error"), None),
    "cleanup": (sandbox_module, "_remove_tree", OSError(errno.EBUSY, "Device or resource busy"), sandbox_module._remove_tree),
}  # fmt: skip


@pytest.mark.parametrize("failure", MACHINERY_FAILURES)
def test_a_failure_of_the_sandbox_is_a_result_not_an_exception(sandbox, temp_dir, monkeypatch, failure):
    owner, name, error, original = MACHINERY_FAILURES[failure]
    monkeypatch.setattr(owner, name, failing(error, original))
    results = [sandbox.run("print('hello')"), *sandbox.run_many(["print(1)", "print(2)"], workers=2)]
    monkeypatch.undo()
    for result in results:
        assert (result.status, result.ok, result.exit_code) == ("sandbox_error", False, None), result
        assert result.reason.startswith("sandbox error: ") and error.strerror in result.reason, result.reason
        assert "\n" not in result.reason and result.backend == sandbox.backend
    assert work_dirs(temp_dir) == []
    assert sandbox.run("print('still here')").stdout == "still here\n"


def test_only_a_bad_hash_seed_raises():
    with pytest.raises(ValueError, match="hash_seed"):
        Sandbox(backend="rlimit").run_many(["pass"], hash_seed=2**32)


FORGE_SUBMISSION = "<task>What does this print?</task><program>print(1)</program>"
EAGAIN = BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")


def test_task_forge_records_a_sandbox_failure_as_an_invalid_task(monkeypatch):
    env = games.make("task_forge", attempts=1)
    env.reset(seed=0)
    monkeypatch.setattr(subprocess, "Popen", failing(EAGAIN))
    env.step(FORGE_SUBMISSION)
    outcome = env.outcome()
    assert outcome == env.unwrapped.rules.outcome()
    assert not outcome["valid_task"] and outcome["attempts"] == []
    assert outcome["invalid_reason"].startswith("the program failed: sandbox error: ")
    assert "Resource temporarily unavailable" in outcome["invalid_reason"]


def test_with_seed_tasks_a_sandbox_failure_goes_on_and_a_tool_call_shows_it(monkeypatch):
    env = games.make("task_forge", attempts=1, tool_calls=1, seed_tasks=True)
    env.reset(seed=0)
    monkeypatch.setattr(subprocess, "Popen", failing(EAGAIN))
    env.step(FORGE_SUBMISSION)
    outcome = env.outcome()
    assert outcome["seeded"] and "sandbox error" in outcome["invalid_reason"] and env.turn_tag() == "attempt:0"
    env.step("```python\nprint(6 * 7)\n```")  # the executor's tool call hits the same failure
    prompt = env.observe("executor")["prompt"]
    assert "[sandbox error: BlockingIOError: [Errno 11] Resource temporarily unavailable]" in prompt, prompt
    assert env.turn_tag() == "attempt:0" and "Python runs left: 0" in prompt  # the attempt goes on
    env.step("\\boxed{42}")
    assert env.turn_tag() == "judge:0" and env.outcome()["attempts"][0]["answer"] == "42"
