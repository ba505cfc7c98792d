"""Run a program written by a model in a separate, limited process, and report what happened.

>>> from games.sandbox import Sandbox
>>> result = Sandbox().run("print(sum(range(10)))")
>>> result.status, result.stdout
('ok', '45\\n')

Nothing of the program runs in our process. Each run gets a fresh interpreter (the *base*
Python, ``sys.base_prefix``, never the venv) started with ``-s -S -B``: the standard library
only, no site-packages, no bytecode written. It gets a throwaway working directory holding
``main.py``, deleted afterwards, and an environment of exactly ``PATH=/usr/bin:/bin``,
``LANG=C.UTF-8``, ``HOME=<work dir>``, ``PYTHONHASHSEED=<hash_seed>`` and ``MALLOC_ARENA_MAX=1``
(see ``_execute``). We do not pass ``-E``/``-I``: they would ignore ``PYTHONHASHSEED``, and the
environment is entirely ours anyway.

Backends (``Sandbox(backend=...)``; ``"auto"`` picks bwrap when it is installed and a probe run works):

| backend  | isolation                                                                              |
|----------|----------------------------------------------------------------------------------------|
| "bwrap"  | bubblewrap (Debian's ``bubblewrap``): new pid, net, ipc, uts (and user, if not root)   |
|          | namespaces; only /usr, /bin, /lib*, the base Python read-only, a private /proc, /dev,  |
|          | an empty tmpfs /tmp and the work dir; killed with us (``--die-with-parent``).          |
|          | This is the security boundary.                                                         |
| "rlimit" | the fallback for machines without bubblewrap: the same limits and the audit hook below |
|          | in a plain child process, in its own session, cwd = the work dir.                      |

Limits, both backends, set by a short prelude (our code, run with ``-c`` before ``main.py``):
RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC, RLIMIT_NOFILE, RLIMIT_FSIZE (= ``output_bytes`` + 1, so the
kernel caps stdout, stderr and any file the program writes, and we can tell "reached" from
"exceeded"), RLIMIT_CORE = 0. Wall time is ours: we wait on a pidfd, then kill the process group
(and, with bwrap, its pid namespace goes with it).

Why a prelude, not ``preexec_fn``: ``run_many`` starts processes from threads, where
``preexec_fn`` can deadlock (subprocess docs). And RLIMIT_NPROC counts per (user namespace, uid):
set inside bubblewrap's user namespace it holds per run; set outside, every run at once would
share it with all our own processes.

As root. The kernel never applies RLIMIT_NPROC to uid 0, and that includes bubblewrap's
``--unshare-user --uid 65534`` run by root, whose sandbox uid maps back to root (measured: 50
threads started under an NPROC of 8). So as root each run gets an unprivileged uid of its own
(``_run_uid``; one per run, so runs do not share the NPROC count), and the prelude switches to it
before any of the program runs. bwrap then runs without a user namespace, keeping only
CAP_SETUID, CAP_SETGID and CAP_DAC_READ_SEARCH, which the switch drops (no_new_privs is set). In
the rlimit backend, if the base Python sits where the new uid cannot enter (pyenv under /root),
the prelude keeps an ``O_PATH`` fd on ``sys.base_prefix`` and imports the standard library
through ``/proc/self/fd/N``. With a uid of its own, NPROC binds and our ``/proc/<pid>/environ``
is closed to the program.

The audit hook (``sys.addaudithook``, PEP 578) refuses: opening files outside the work dir (reading
is allowed in the standard library, except its site-packages), listing or changing files outside
it, any ``socket.*`` and ``ctypes.*`` event, importing ``_ctypes`` or ``_posixsubprocess`` (so
``subprocess`` and ``asyncio`` cannot be imported), ``os.system``, ``os.exec*``, ``os.posix_spawn``,
``os.fork``, ``os.kill``, ``resource.setrlimit``, tracing, and ``gc``, ``__code__`` or
``__defaults__`` tricks that would reach the hook itself. It runs in both backends, so a program
behaves the same whichever one a machine has (``audit_hook=False`` is for testing bubblewrap
alone). **An audit hook is not a security boundary**: it sees only what CPython chooses to audit,
runs inside the program's own interpreter, and can be evaded (a symlink swapped between check and
open, bugs that corrupt memory). bubblewrap is the real boundary; the fallback exists for
machines without it, and rests on rlimits, the separate uid (as root) and this hook.

Status, in the order they are decided:

| status         | when                                                                        |
|----------------|-----------------------------------------------------------------------------|
| "timeout"      | wall time ran out (we killed it), or the CPU limit did (SIGXCPU/SIGKILL)    |
| "output_limit" | stdout or stderr grew past ``output_bytes``, or a write got EFBIG           |
| "memory"       | ``MemoryError``, or a SIGKILL we did not send after using half the memory   |
| "killed"       | any other death by a signal                                                 |
| "error"        | a nonzero exit code                                                         |
| "ok"           | exit code 0                                                                 |

bubblewrap reports a death by signal N as exit code 128 + N, so under bwrap an exit code in
129..159 is read as a signal.

Cost of one ``run("pass")`` (2 cores under other load, Python 3.11, bwrap 0.8.0): bwrap about
45 ms one after another, 25 ms each overlapped in ``run_many``; rlimit about 25 ms and 18 ms.
A bare interpreter start is about 16 ms of that.

Known gaps: the program may fill the disk under its work dir with many files of up to
``output_bytes`` each (no quota). In the rlimit backend, a program that gets past the hook could
read any world-readable file, and a process it forks and moves to a new session would outlive
the run (at most ``processes`` of them as root; without root there is no RLIMIT_NPROC at all,
since it would count all our own processes).
"""

from __future__ import annotations

import itertools
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Literal

Backend = Literal["bwrap", "rlimit"]
Status = Literal["ok", "error", "timeout", "memory", "output_limit", "killed"]


@dataclass(frozen=True)
class Limits:
    """What one run may use. Every limit is enforced by the kernel, except wall time (ours)."""

    cpu_seconds: float = 2.0
    """CPU time (RLIMIT_CPU); rounded up to whole seconds, the kernel's unit."""
    wall_seconds: float = 5.0
    """Wall-clock time, from start to the end of the run; we kill the run after it."""
    memory_bytes: int = 256 * 2**20
    """Address space (RLIMIT_AS); the interpreter itself takes about 20 MiB of it."""
    processes: int = 8
    """Processes and threads the program may have at once, its main thread included (RLIMIT_NPROC)."""
    open_files: int = 32
    """Open file descriptors (RLIMIT_NOFILE), stdin, stdout and stderr included."""
    output_bytes: int = 16_384
    """Cap on stdout, on stderr, and on any file the program writes, each (RLIMIT_FSIZE)."""

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_bytes", "processes", "open_files", "output_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}.")
        if self.open_files < 8:
            raise ValueError(f"Limits.open_files must be >= 8 (the interpreter uses some), got {self.open_files}.")


@dataclass(frozen=True)
class RunResult:
    """How one run ended. ``stdout`` and ``stderr`` hold at most ``Limits.output_bytes`` bytes each."""

    status: Status
    stdout: str
    stderr: str
    exit_code: int | None
    """The program's exit code; None when it was killed (timeout, signal)."""
    wall_seconds: float
    backend: str
    """"bwrap" or "rlimit"."""
    detail: str = ""
    """Why the run ended, when the sandbox knows better than the exit code (timeouts, limits)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> str:
        """One human-readable line, e.g. "exit code 1: ZeroDivisionError: division by zero"."""
        if self.detail:
            return self.detail
        if self.status == "ok":
            return "ok"
        last = _last_line(self.stderr)
        return f"exit code {self.exit_code}: {last}" if last else f"exit code {self.exit_code}"


class Sandbox:
    """Runs model-written programs under ``limits``, one fresh process each.

    ``audit_hook=False`` leaves out the prelude's audit hook; it is allowed with bwrap only, and
    exists so that tests can check that bubblewrap alone contains each attack.
    """

    def __init__(
        self,
        limits: Limits = Limits(),
        backend: Literal["auto", "bwrap", "rlimit"] = "auto",
        *,
        audit_hook: bool = True,
    ) -> None:
        if backend not in ("auto", "bwrap", "rlimit"):
            raise ValueError(f'backend must be "auto", "bwrap" or "rlimit", got {backend!r}.')
        if backend == "bwrap" and not _bwrap_works():
            raise RuntimeError(
                "The bwrap backend needs a working bubblewrap: install Debian's bubblewrap "
                '(`make system-deps`), or use backend="rlimit".'
            )
        if backend == "auto":
            backend = "bwrap" if _bwrap_works() else "rlimit"
        if backend == "rlimit" and not audit_hook:
            raise ValueError('The rlimit backend needs the audit hook; audit_hook=False is for backend="bwrap" only.')
        self.limits = limits
        self.backend: Backend = backend
        self.audit_hook = audit_hook

    def run(self, code: str, stdin: str = "", hash_seed: int = 0) -> RunResult:
        """Run ``code`` as ``main.py`` with ``stdin`` on its standard input."""
        if not 0 <= hash_seed <= 2**32 - 1:
            raise ValueError(f"hash_seed must be in [0, 2**32 - 1] (PYTHONHASHSEED's range), got {hash_seed}.")
        return _execute(code, stdin, hash_seed, self.limits, self.backend, self.audit_hook)

    def run_many(
        self, codes: Sequence[str], stdin: str = "", hash_seed: int = 0, workers: int | None = None
    ) -> list[RunResult]:
        """Run each program in ``codes``, overlapped on ``workers`` threads (default: one per CPU).

        Results come back in input order.
        """
        if not codes:
            return []
        with ThreadPoolExecutor(max_workers=min(len(codes), workers or os.cpu_count() or 1)) as pool:
            return list(pool.map(lambda code: self.run(code, stdin, hash_seed), codes))


def available_backends() -> list[str]:
    """The backends that work on this machine, best first."""
    return ["bwrap", "rlimit"] if _bwrap_works() else ["rlimit"]


# ---------------------------------------------------------------------------------------------
# One run


def _execute(code: str, stdin: str, hash_seed: int, limits: Limits, backend: Backend, audit_hook: bool) -> RunResult:
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="coevo-sandbox-"))
    uid = _run_uid() if os.geteuid() == 0 else None
    try:
        main = os.path.join(workdir, "main.py")
        with open(main, "w", encoding="utf-8") as f:
            f.write(code)
        if uid is not None:
            os.chown(main, uid, uid)
            os.chown(workdir, uid, uid)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "PYTHONHASHSEED": str(hash_seed),
               # One malloc arena: each further arena reserves 64 MiB of address space, so under RLIMIT_AS
               # a program could otherwise start only about three threads (measured).
               "MALLOC_ARENA_MAX": "1"}
        prelude = _prelude(limits, backend, audit_hook, workdir, main, uid)
        argv = [_interpreter(), "-s", "-S", "-B", "-c", prelude, main]
        if backend == "bwrap":
            argv = _bwrap_argv(workdir, env, as_root=uid is not None) + argv
        with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
            fin.write(stdin.encode("utf-8"))
            fin.seek(0)
            start = time.perf_counter()
            proc = subprocess.Popen(
                argv, stdin=fin, stdout=fout, stderr=ferr, env=env, cwd=workdir, start_new_session=True
            )
            try:
                timed_out = not _wait_exit(proc.pid, limits.wall_seconds)
            finally:
                # Kill the group before reaping: its id cannot be reused while the leader is a zombie.
                _kill_group(proc.pid)
                _, wait_status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(wait_status)
            wall = time.perf_counter() - start
            out_size, err_size = os.fstat(fout.fileno()).st_size, os.fstat(ferr.fileno()).st_size
            stdout, stderr = _read_head(fout, limits.output_bytes), _read_head(ferr, limits.output_bytes)
    finally:
        _remove_tree(workdir)
    status, detail, exit_code = _classify(
        proc.returncode, backend, timed_out, usage, max(out_size, err_size), stderr, limits
    )
    return RunResult(status, stdout, stderr, exit_code, wall, backend, detail)


def _classify(
    returncode: int, backend: Backend, timed_out: bool, usage, out_size: int, stderr: str, limits: Limits
) -> tuple[Status, str, int | None]:
    """(status, detail, exit code) of a finished run; the order follows the module docstring's table."""
    signum = -returncode if returncode < 0 else None
    if backend == "bwrap" and 128 < returncode < 160:  # bubblewrap's pid 1 reports a signal N as 128 + N
        signum = returncode - 128
    exit_code = None if signum is not None else returncode
    last = _last_line(stderr)
    cpu = usage.ru_utime + usage.ru_stime
    if timed_out:
        return "timeout", f"timed out after {limits.wall_seconds} s of wall time", None
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu >= math.ceil(limits.cpu_seconds)):
        return "timeout", f"exceeded the CPU limit ({limits.cpu_seconds} s of CPU time)", None
    if out_size > limits.output_bytes or signum == signal.SIGXFSZ or "[Errno 27] File too large" in last:
        return "output_limit", f"exceeded the output limit ({limits.output_bytes} bytes)", exit_code
    mib = limits.memory_bytes / 2**20
    if last.startswith("MemoryError"):
        return "memory", f"ran out of memory (limit {mib:g} MiB): {last}", exit_code
    if signum == signal.SIGKILL and usage.ru_maxrss * 1024 >= limits.memory_bytes / 2:  # ru_maxrss is in KiB
        return "memory", f"killed by SIGKILL using {usage.ru_maxrss // 1024} MiB (limit {mib:g} MiB)", None
    if signum is not None:
        return "killed", f"killed by {_signal_name(signum)}", None
    return ("error" if returncode else "ok"), "", exit_code


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` exits, without reaping it; False on timeout."""
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(pidfd)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_RUNS = itertools.count()


def _run_uid() -> int:
    """A uid (and gid) of this run's own, used only when we are root.

    Unique among this process's concurrent runs (4096 at most) and offset by our pid so that two
    processes rarely share one; the range 0x40000000.. is far from real users and subuid ranges.
    """
    return 0x4000_0000 + (os.getpid() % 0x10000) * 0x1000 + next(_RUNS) % 0x1000


def _read_head(f, limit: int) -> str:
    f.seek(0)
    return f.read(limit).decode("utf-8", "replace")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _remove_tree(path: str) -> None:
    """Delete the work dir, even if the program took the permissions off directories in it."""
    try:
        shutil.rmtree(path)
    except OSError:
        os.chmod(path, 0o700)
        for root, dirs, _files in os.walk(path):
            for name in dirs:  # before os.walk descends into them
                if not os.path.islink(os.path.join(root, name)):
                    os.chmod(os.path.join(root, name), 0o700)
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The interpreter, bubblewrap and the prelude


@cache
def _interpreter() -> str:
    """The base interpreter (the venv's python is a link to it, with our site-packages)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in (version, "python3"):
        path = os.path.join(sys.base_prefix, "bin", name)
        if os.path.exists(path):
            return os.path.realpath(path)
    raise RuntimeError(f"No base Python found under sys.base_prefix ({sys.base_prefix}); the sandbox needs one.")


def _bwrap_argv(workdir: str, env: dict[str, str], as_root: bool) -> list[str]:
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--clearenv"]
    if as_root:
        # No user namespace: it would map the sandbox back to uid 0, which RLIMIT_NPROC ignores.
        # The prelude switches to the run's own uid, which drops these capabilities.
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                 "--cap-add", "CAP_DAC_READ_SEARCH"]
    else:
        argv += ["--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    for path in ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin"):
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    bound = ["/usr/"]
    prefixes = {os.path.realpath(p) + "/" for p in (sys.base_prefix, sys.base_exec_prefix, _interpreter())}
    for prefix in sorted(prefixes):
        if not prefix.startswith(tuple(bound)):  # sorted: a parent comes before its children
            # Its parents (e.g. /root for pyenv) would otherwise be closed to the sandbox's uid.
            parents = [prefix[:i] for i in range(1, len(prefix) - 1) if prefix[i] == "/"]
            for parent in parents:
                argv += ["--perms", "0755", "--dir", parent]
            argv += ["--ro-bind", prefix[:-1], prefix[:-1]]
            bound.append(prefix)
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", workdir, workdir, "--chdir", workdir]
    return argv


@cache
def _bwrap_works() -> bool:
    """bwrap is installed and a probe program runs under it (namespaces may be forbidden)."""
    if shutil.which("bwrap") is None:
        return False
    try:
        result = _execute("print(6 * 7)", "", 0, Limits(), "bwrap", audit_hook=True)
    except OSError:
        return False
    return result.status == "ok" and result.stdout == "42\n"


def _prelude(limits: Limits, backend: Backend, audit_hook: bool, workdir: str, main: str, uid: int | None) -> str:
    cpu = math.ceil(limits.cpu_seconds)
    # bubblewrap's pid 1 shares the sandbox's uid inside its user namespace (the non-root case).
    nproc = limits.processes + (1 if backend == "bwrap" and uid is None else 0)
    rlimits = [("RLIMIT_CPU", (cpu, cpu + 1)), ("RLIMIT_AS", (limits.memory_bytes,) * 2),
               ("RLIMIT_NOFILE", (limits.open_files,) * 2), ("RLIMIT_FSIZE", (limits.output_bytes + 1,) * 2),
               ("RLIMIT_CORE", (0, 0))]
    if backend == "bwrap" or uid is not None:  # otherwise RLIMIT_NPROC would count all our own processes
        rlimits.append(("RLIMIT_NPROC", (nproc, nproc)))
    config = {"uid": uid, "workdir": workdir, "main": main, "rlimits": rlimits, "audit": audit_hook,
              "alarm": math.ceil(limits.wall_seconds) + 1}
    return _PRELUDE.replace("__CONFIG__", repr(config))


# Run with -c in the sandboxed interpreter, before main.py, in four numbered steps.
_PRELUDE = r'''
import os, sys, resource, builtins, _signal, _stat
_cfg = __CONFIG__
if _cfg["uid"] is not None:
    # 1) as root: switch to the run's own uid; reach the stdlib through an fd if it cannot otherwise
    _fd = os.open(sys.base_prefix, os.O_PATH | os.O_DIRECTORY)
    os.setgroups([])
    os.setgid(_cfg["uid"])
    os.setuid(_cfg["uid"])
    if os.access(os.path.dirname(os.__file__), os.R_OK | os.X_OK):
        os.close(_fd)
    else:
        _via = "/proc/self/fd/%d" % _fd
        _paths = [sys.path] + [getattr(m, "__path__", None) for m in list(sys.modules.values())]
        _paths = [p for p in _paths if isinstance(p, list)]
        for _path in _paths:  # sys.path, and packages already imported (encodings loads codecs lazily)
            _path[:] = [_via + p[len(sys.base_prefix):] if p.startswith(sys.base_prefix) else p for p in _path]
os.chdir(_cfg["workdir"])
# 2) the kernel's limits; 3) a backstop for wall time should our process die (bwrap has its own)
for _name, _value in _cfg["rlimits"]:
    resource.setrlimit(getattr(resource, _name), _value)
_signal.alarm(_cfg["alarm"])
builtins.exit = builtins.quit = sys.exit  # site (-S) would have defined them

def _resolve(path, _lstat=os.lstat, _readlink=os.readlink, _islink=_stat.S_ISLNK, _getcwd=os.getcwd):
    """The absolute path with symlinks resolved, without code the program could patch."""
    if not path.startswith("/"):
        path = _getcwd() + "/" + path
    todo, done, links = path.split("/")[::-1], [], 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            done = done[:-1]
            continue
        here = "/" + "/".join(done + [part])
        try:
            mode = _lstat(here).st_mode
        except OSError:
            done = done + [part]
            continue
        if not _islink(mode):
            done = done + [part]
            continue
        links += 1
        if links > 40:
            raise PermissionError("sandbox: too many symbolic links in %r" % path)
        target = _readlink(here)
        if target.startswith("/"):
            done = []
        todo.extend(target.split("/")[::-1])
    return "/" + "/".join(done)

def _audit(event, args, _p=None):
    """Refuse what the module docstring lists; everything it uses is bound in _p, out of the program's reach."""
    (work, reads, denied, devices, path_events, blocked, blocked_prefixes, blocked_imports, protected,
     resolve, fspath, isinstance, bytes, int, str, write_flags) = _p
    if event == "open" or event in path_events:
        if event == "open":  # (path, mode, flags): builtins.open gives a mode, os.open gives flags
            indices = (0,)
            writes = isinstance(args[2], int) and args[2] & write_flags != 0
            writes = writes or (isinstance(args[1], str) and args[1].strip("rbtU") != "")
        else:
            indices, writes = path_events[event]
        for i in indices:
            path = "." if args[i] is None else args[i]
            if isinstance(path, int):  # an fd the program already holds
                continue
            path = fspath(path)
            if isinstance(path, bytes):
                path = path.decode("utf-8", "surrogateescape")
            full = resolve(path)
            if (full + "/").startswith(work) or full in devices:
                continue
            if not writes and (full + "/").startswith(reads) and not (full + "/").startswith(denied):
                continue
            raise PermissionError("sandbox: %s of %r is not allowed (outside the work dir)" % (event, path))
    elif event in blocked or event.startswith(blocked_prefixes):
        raise PermissionError("sandbox: %s is not allowed" % event)
    elif event == "import" and args[0] in blocked_imports:
        raise PermissionError("sandbox: importing %s is not allowed" % args[0])
    elif event in ("object.__setattr__", "object.__delattr__") and (args[1] == "__code__" or args[0] in protected):
        raise PermissionError("sandbox: changing %s is not allowed" % args[1])

if _cfg["audit"]:
    _stdlib = _resolve(os.path.dirname(os.__file__))
    _dynload = _resolve(os.path.dirname(resource.__file__))
    _frozendict = type(type.__dict__)  # mappingproxy: read-only, and the dict under it is out of reach
    _audit.__defaults__ = ((
        _resolve(_cfg["workdir"]) + "/",
        (_stdlib + "/", _dynload + "/"),
        (_stdlib + "/site-packages/", _stdlib + "/dist-packages/"),
        ("/dev/null", "/dev/urandom"),
        # event -> (indices of its path arguments, whether it changes files)
        _frozendict({
            "os.listdir": ((0,), False), "os.scandir": ((0,), False), "os.getxattr": ((0,), False),
            "os.listxattr": ((0,), False), "os.chdir": ((0,), True), "os.mkdir": ((0,), True),
            "os.remove": ((0,), True), "os.rmdir": ((0,), True), "os.rename": ((0, 1), True),
            "os.link": ((0, 1), True), "os.symlink": ((1,), True), "os.truncate": ((0,), True),
            "os.chmod": ((0,), True), "os.chown": ((0,), True), "os.utime": ((0,), True),
            "os.setxattr": ((0,), True), "os.removexattr": ((0,), True),
        }),
        frozenset({"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
                   "os.killpg", "signal.pthread_kill", "subprocess.Popen", "resource.setrlimit",
                   "resource.prlimit", "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                   "gc.get_referents", "code.__new__"}),
        ("socket.", "ctypes."),
        frozenset({"_ctypes", "_posixsubprocess"}),
        (_audit, _resolve),
        _resolve, os.fspath, isinstance, bytes, int, str,
        os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
    ),)
    sys.addaudithook(_audit)

# 4) run main.py as __main__
_main = type(sys)("__main__")
_main.__file__ = _cfg["main"]
sys.modules["__main__"] = _main
sys.argv = [_cfg["main"]]
with open(_cfg["main"], encoding="utf-8") as _f:
    _code = compile(_f.read(), _cfg["main"], "exec")
del _cfg, _f
exec(_code, _main.__dict__)
'''
