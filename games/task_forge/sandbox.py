"""Run a program written by a model in a separate, limited process, and report what happened.

>>> from games.task_forge.sandbox import Sandbox
>>> result = Sandbox().run("print(sum(range(10)))")
>>> result.status, result.stdout
('ok', '45\\n')

Nothing of the program runs in our process. Each run gets a fresh interpreter (the *base*
Python, ``sys.base_prefix``, never the venv) started with ``-s -S -B``: the standard library
only, no site-packages, no bytecode written. It gets a throwaway working directory holding
``main.py``, deleted afterwards, and an environment of exactly ``PATH=/usr/bin:/bin``,
``LANG=C.UTF-8``, ``HOME=<work dir>``, ``PYTHONHASHSEED=<hash_seed>`` and ``MALLOC_ARENA_MAX=1``
(see ``_supervise``). We do not pass ``-E``/``-I``: they would ignore ``PYTHONHASHSEED``, and the
environment is entirely ours anyway. Any ``str`` is a valid program or stdin: both reach the
program UTF-8 encoded with ``surrogatepass``, so a lone surrogate arrives as its three bytes, and a
program holding one fails to compile (Python source cannot hold one), with that as its reason.

Backends (``Sandbox(backend=...)``). ``"auto"``, the default, is ``"bwrap"``: where bubblewrap is
missing or cannot start a sandbox, it raises :class:`SandboxUnavailable` saying how to install it
(``make system-deps``). The fallback is used only when asked for, and warns once per process
(:class:`SandboxFallbackWarning`, text in ``FALLBACK_WARNING``).

| backend  | contains                                                | does not contain                           |
|----------|---------------------------------------------------------|--------------------------------------------|
| "bwrap"  | The security boundary. bubblewrap (Debian's             | the disk under the work dir (no quota);    |
|          | ``bubblewrap``): new pid, net, ipc, uts (and user, if   | the machine's CPU and memory beyond the    |
|          | not root) namespaces; only /usr, /bin, /lib*, the base  | limits below; kernel bugs reachable by     |
|          | Python read-only, a private /proc, /dev, an empty tmpfs | syscalls (there is no seccomp filter).     |
|          | /tmp and the work dir; every process of the run dies    |                                            |
|          | with its pid namespace (``--die-with-parent``).         |                                            |
| "rlimit" | Opt-in, for machines without bubblewrap. The same       | Not a boundary: with no namespaces, files, |
|          | limits in a plain child process in its own session,     | network and processes are only the hook's  |
|          | cwd = the work dir, and the audit hook below; as root,  | to refuse, and it does not see everything  |
|          | a uid of its own, every process of which is killed      | ("Known gaps"); without root, processes    |
|          | after the run.                                          | forked past the hook outlive the run.      |

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
(``_run_uid``: no other live run on the machine has it), and the prelude switches to it before
any of the program runs. bwrap then runs without a user namespace, keeping only CAP_SETUID,
CAP_SETGID and CAP_DAC_READ_SEARCH, which the switch drops (no_new_privs is set). In the rlimit
backend, if the standard library sits where the new uid cannot enter (pyenv under /root), the
prelude keeps an ``O_PATH`` fd on it and imports it through ``/proc/self/fd/N``; the hook treats
that fd as one more directory a relative path may be relative to. With a uid of its own, NPROC
binds, our ``/proc/<pid>/environ`` is closed to the program, and after the run we kill every
process with that uid, wherever it moved (``_kill_uid``).

The audit hook (``sys.addaudithook``, PEP 578) refuses: opening files outside the work dir (reading
is allowed in the standard library, except its site-packages), listing or changing files outside
it, opening a directory outside it (so the only directory fds a program holds are in its work dir,
and the kept stdlib fd), a relative path with a ``..`` in it, creating a symlink, an fd in place of
a path for a change (``os.fchdir``, ``os.fchmod``…), any ``socket.*``, ``ctypes.*`` and
``syslog.*`` event, importing ``_ctypes``, ``_posixsubprocess`` (so ``subprocess`` and ``asyncio``
cannot be imported), ``_posixshmem`` (it creates files in /dev/shm), ``_xxsubinterpreters`` or the
C-API test modules (``_testcapi``…: hooks are per interpreter, and a subinterpreter would run
without ours) under any name (``x._posixsubprocess`` loads the same native code), native code from
anywhere but the standard library (a program could write its own extension module),
``os.system``, ``os.exec*``, ``os.posix_spawn``, ``os.fork``, ``os.kill``,
``resource.setrlimit``, tracing, and ``gc``, ``__code__`` or ``__defaults__`` tricks that would
reach the hook itself. Why the path rules: the hook resolves a relative path against the cwd, but
``dir_fd=`` makes the kernel resolve it against that fd's directory, and the "open" event does not
report ``dir_fd``. Without ``..`` and without symlinks, a relative path resolves below whichever
directory it starts from, so from a work-dir fd it stays in the work dir, and every other start
(the cwd, the kept stdlib fd) the hook checks. It runs in both backends, so a program behaves the
same whichever one a machine has (``audit_hook=False`` is for testing bubblewrap alone). **An
audit hook is not a security boundary**: it sees only what CPython chooses to audit and runs
inside the program's own interpreter, where a bug that corrupts memory evades it.

After every run, whatever the program did: its process group is killed; as root, every process of
its uid; then its work dir is removed (``_remove_tree``), following no symlink out of it.

Status, in the order they are decided:

| status          | when                                                                        |
|-----------------|-----------------------------------------------------------------------------|
| "sandbox_error" | the sandbox itself failed, not the program (ENOSPC, EMFILE, EAGAIN…)        |
| "timeout"       | wall time ran out (we killed it), or the CPU limit did (SIGXCPU/SIGKILL)    |
| "output_limit"  | stdout or stderr grew past ``output_bytes``, or a write got EFBIG           |
| "memory"        | ``MemoryError``, or a SIGKILL we did not send after using half the memory   |
| "killed"        | any other death by a signal                                                 |
| "error"         | a nonzero exit code                                                         |
| "ok"            | exit code 0                                                                 |

A "sandbox_error" is a result, never an exception (its ``detail`` names the error, on one line):
model code must not be able to stop the trainer, and a program can provoke some of these (fill
the disk, take the machine's processes). Only a bad ``hash_seed``, our caller's error, raises.
bubblewrap reports a death by signal N as exit code 128 + N, so under bwrap an exit code in
129..159 is read as a signal.

Cost of one ``run("pass")`` (2 cores under other load, Python 3.11, bwrap 0.8.0): bwrap about
45 ms one after another, 25 ms each overlapped in ``run_many``; rlimit about 25 ms and 18 ms.
A bare interpreter start is about 16 ms of that.

Known gaps. Both backends: the program may fill the disk under its work dir with many files of up to
``output_bytes`` each (no quota). The rlimit backend has no namespaces, so all of its containment of
files, network and processes is the hook's, and a program gets past it by: calls CPython does not
audit (``os.stat``, ``os.access``, ``os.readlink`` reveal any path's metadata; ``os.mknod`` and
``os.mkfifo`` create empty files or FIFOs wherever the run's uid may write, such as /tmp; ``pwd``
and ``grp`` read /etc/passwd and /etc/group through libc); any bug that corrupts the interpreter's
memory. Past the hook it can read every file and reach every network the run's uid can (without
root: everything you can), and without root a process it forks and moves to a new session outlives
the run, may keep writing to the work dir (then the run is a "sandbox_error" and the dir stays), and
there is no RLIMIT_NPROC at all (it would count all our own processes). As root with the stdlib
reached through the kept fd, a work dir named like a stdlib package (``json``…) cannot be opened as
a directory fd (``shutil.rmtree`` of it fails): the hook cannot tell which of the two it is relative
to.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Literal

Backend = Literal["bwrap", "rlimit"]
Status = Literal["ok", "error", "timeout", "memory", "output_limit", "killed", "sandbox_error"]

FALLBACK_WARNING = (
    'games.task_forge.sandbox: backend="rlimit" is not a security boundary. It runs each program as a plain child '
    'process under rlimits, in a session of its own (as root: with a uid of its own, whose processes are all '
    "killed after the run), and the rest rests on a Python audit hook inside the program's own interpreter, "
    'which sees only what CPython audits: there is no filesystem, network or PID namespace, so calls it does '
    "not audit get through (os.stat, os.access and os.readlink reveal any path's metadata; os.mknod and "
    "os.mkfifo create empty files wherever the run's uid may write; pwd and grp read /etc/passwd and "
    '/etc/group), and a program that gets past the hook (a bug that corrupts memory) can read every file and '
    "reach every network the run's uid can (without root: everything you can); without root, a process it "
    'forks past the hook outlives the run, and there is no process limit. Install bubblewrap '
    '(`make system-deps`) and use the default backend.'
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap, the default backend, cannot run programs here; the message says how to fix it."""


class SandboxFallbackWarning(UserWarning):
    """Raised once per process, by the first run of the rlimit fallback: what it does not contain."""


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
    """The program's exit code; None when it was killed (timeout, signal) or never ran (sandbox_error)."""
    wall_seconds: float
    backend: str
    """"bwrap" or "rlimit"."""
    detail: str = ""
    """Why the run ended, when the sandbox knows better than the exit code (timeouts, limits, its own errors)."""

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

    ``backend="rlimit"`` opts into the fallback (module docstring). ``audit_hook=False`` leaves out
    the prelude's audit hook; it is allowed with bwrap only, and exists so that tests can check
    that bubblewrap alone contains each attack.
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
        if backend == "rlimit" and not audit_hook:
            raise ValueError('The rlimit backend needs the audit hook; audit_hook=False is for backend="bwrap" only.')
        problem = _bwrap_problem() if backend != "rlimit" else ""
        if problem:
            raise SandboxUnavailable(
                f"games.task_forge.sandbox runs programs under bubblewrap, but {problem}: install it with `make system-deps` "
                f'(Debian\'s `bubblewrap` package), or opt into the weaker fallback with Sandbox(backend="rlimit").'
            )
        self.limits = limits
        self.backend: Backend = "rlimit" if backend == "rlimit" else "bwrap"
        self.audit_hook = audit_hook

    def run(self, code: str, stdin: str = "", hash_seed: int = 0) -> RunResult:
        """Run ``code`` as ``main.py`` with ``stdin`` on its standard input.

        Whatever the program does, and whatever fails in the sandbox itself, comes back as a
        result (the latter as "sandbox_error"); only a bad ``hash_seed`` raises.
        """
        if not 0 <= hash_seed <= 2**32 - 1:
            raise ValueError(f"hash_seed must be in [0, 2**32 - 1] (PYTHONHASHSEED's range), got {hash_seed}.")
        if self.backend == "rlimit":
            _warn_about_the_fallback()
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
    """The backends that work on this machine, best first ("rlimit" only when asked for by name)."""
    return ["rlimit"] if _bwrap_problem() else ["bwrap", "rlimit"]


_fallback_warned = threading.Lock()  # taken, and never given back, by the first rlimit run: one warning per process


TOOL_OUTPUT_SHOWN = 600  # characters of a player's run fed back to it


def players_sandbox(limits: Limits | None, backend: Literal["bwrap", "rlimit"]) -> Sandbox:
    """The sandbox a game runs its players' code in; without bubblewrap the error also says how a
    run config and ``coevo match`` opt into the fallback, where a user meets it."""
    try:
        return Sandbox(limits or Limits(), backend=backend)
    except SandboxUnavailable as err:
        raise SandboxUnavailable(
            f"{err} In task forge and graph nodes with tools: [forge] sandbox = \"rlimit\" in a run config, "
            "--option sandbox=rlimit in coevo match."
        ) from None


def tool_run(sandbox: Sandbox, code: str) -> str:
    """Run a player's code; the code and what it printed (or why it failed, trimmed), as the
    player is shown it back."""
    result = sandbox.run(code)
    shown = result.stdout if result.ok else f"{result.stdout}\n[{result.reason}]".strip()
    return f"```python\n{code}\n```\nOutput:\n{shown[:TOOL_OUTPUT_SHOWN]}"


def _warn_about_the_fallback() -> None:
    if _fallback_warned.acquire(blocking=False):
        warnings.warn(FALLBACK_WARNING, SandboxFallbackWarning, stacklevel=3)  # 3: the caller of Sandbox.run


# ---------------------------------------------------------------------------------------------
# One run


def _execute(code: str, stdin: str, hash_seed: int, limits: Limits, backend: Backend, audit_hook: bool) -> RunResult:
    """One run in a fresh work dir, then the cleanup; a failure of any of it is a "sandbox_error" result."""
    start = time.perf_counter()
    try:
        workdir = os.path.realpath(tempfile.mkdtemp(prefix="coevo-sandbox-"))
        with _run_uid() as uid:
            try:
                return _supervise(workdir, uid, code, stdin, hash_seed, limits, backend, audit_hook)
            finally:
                try:
                    if uid is not None:
                        _kill_uid(uid)
                finally:
                    _remove_tree(workdir)
    except Exception as error:  # noqa: BLE001 - whatever failed, model code must not stop the trainer
        return RunResult("sandbox_error", "", "", None, time.perf_counter() - start, backend, _sandbox_error(error))


def _supervise(
    workdir: str, uid: int | None, code: str, stdin: str, hash_seed: int, limits: Limits, backend: Backend,
    audit_hook: bool,
) -> RunResult:  # fmt: skip
    """Start the program in ``workdir``, wait for it within the limits, kill its process group, classify."""
    main = os.path.join(workdir, "main.py")
    with open(main, "w", encoding="utf-8", errors="surrogatepass") as f:
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
        fin.write(stdin.encode("utf-8", "surrogatepass"))
        fin.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=ferr, env=env, cwd=workdir, start_new_session=True)
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


def _sandbox_error(error: BaseException) -> str:
    """``error`` as one line, with the error it cut short, if any (a failed cleanup after a failed start)."""
    text = f"sandbox error: {type(error).__name__}: {error}"
    if error.__context__ is not None:
        text += f" (while handling {type(error.__context__).__name__}: {error.__context__})"
    return " ".join(text.split())


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


def _free_slots(n: int) -> queue.SimpleQueue[int]:
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(n):
        slots.put(slot)
    return slots


_UID_SLOTS = _free_slots(256)  # runs of this process in flight at once, at most
_KILL_WAIT_SECONDS = 2.0  # SIGKILLed processes exit in milliseconds; one stuck in the kernel (D state) may not


@contextlib.contextmanager
def _run_uid() -> Iterator[int | None]:
    """As root, a uid (and gid) of this run's own, held until its processes are dead and its dir is
    gone; None when we are not root.

    No other live run on the machine has it, so killing by uid (``_kill_uid``) kills this run's
    processes only: the range 0x40000000.. is far from real users and subuid ranges, our pid
    (unique while we live, and below 2**22, the kernel's PID_MAX_LIMIT) picks a block of 256, and
    each run in flight holds one slot of it (a 257th waits for one).
    """
    if os.geteuid() != 0:
        yield None
        return
    slot = _UID_SLOTS.get()
    try:
        yield 0x4000_0000 + ((os.getpid() % 2**22) << 8) + slot
    finally:
        _UID_SLOTS.put(slot)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of the run's uid, and wait until none is left alive.

    A process the program moved to a session of its own escapes ``_kill_group``, and under bwrap
    the pid namespace may still be dying when bwrap has exited. ``getpriority(PRIO_USER)`` tells in
    one syscall whether the uid has any process at all (ESRCH: none, the usual case, 3 µs); only
    then do we scan /proc (2 ms for 80 processes). Zombies hold no files and are left to their parent.
    """
    deadline = time.monotonic() + _KILL_WAIT_SECONDS
    while True:
        try:
            os.getpriority(os.PRIO_USER, uid)
        except ProcessLookupError:
            return
        alive = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _live_owner(int(pid)) == uid]
        if not alive:
            return
        if time.monotonic() > deadline:
            raise OSError(f"{len(alive)} processes of the run's uid {uid} outlived SIGKILL for {_KILL_WAIT_SECONDS} s")
        for pid in alive:
            _kill_if_owned(pid, uid)
        time.sleep(0.001)


def _live_owner(pid: int) -> int | None:
    """The real uid of process ``pid``; None if it is gone, or a zombie with no live thread."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            fields = dict(line.split(b":\t", 1) for line in f.read().splitlines() if b":\t" in line)
    except OSError:
        return None
    if fields[b"State"][:1] in (b"Z", b"X") and fields[b"Threads"].strip() == b"1":
        return None
    return int(fields[b"Uid"].split()[0])


def _kill_if_owned(pid: int, uid: int) -> None:
    """SIGKILL ``pid`` if it is still of ``uid``: through a pidfd, so a reused pid is never hit."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if _live_owner(pid) == uid:  # the pidfd pins the process we checked, or one that is already gone
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


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
    """Delete the work dir, whatever the program left in it, following no symlink out of it.

    One ``shutil.rmtree`` is the usual path. Without root it fails on directories the program
    took the permissions off, and Python 3.11's rmtree recurses, a frame and an fd per level, so a
    tree deeper than about 1,000 levels (``os.rename`` in a loop builds one) raises RecursionError
    or EMFILE. coreutils walk with fts, which has neither limit, handles paths longer than PATH_MAX
    and follows no symlink inside the tree: ``chmod -R u+rwx`` gives every directory back to us,
    then ``rm -rf`` removes it all. Raises OSError only if the dir is still there after that.
    """
    try:
        shutil.rmtree(path)
        return
    except (OSError, RecursionError):
        pass
    try:
        real_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        real_dir = False
    if real_dir:  # unlike rm, chmod would follow a symlink named on its command line
        subprocess.run(["chmod", "-R", "u+rwx", "--", path], capture_output=True, check=False)
    removed = subprocess.run(["rm", "-rf", "--one-file-system", "--", path], capture_output=True, check=False)
    if os.path.lexists(path):
        raise OSError(f"could not remove the work dir {path}: {_last_line(removed.stderr.decode(errors='replace'))}")


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


def _parents(path: str) -> list[str]:
    """The directories above absolute ``path``, "/" left out: "/a/b/c" -> ["/a", "/a/b"]."""
    return [path[:i] for i in range(1, len(path)) if path[i] == "/"]


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
    # bubblewrap creates the parents of a mount point 0700, closed to the run's uid (as root): open them.
    for prefix in sorted(prefixes):
        if not prefix.startswith(tuple(bound)):  # sorted: a parent comes before its children
            for parent in _parents(prefix[:-1]):
                argv += ["--perms", "0755", "--dir", parent]
            argv += ["--ro-bind", prefix[:-1], prefix[:-1]]
            bound.append(prefix)
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for parent in _parents(workdir):  # none but /tmp itself, the tmpfs, unless TMPDIR points elsewhere
        if parent != "/tmp":
            argv += ["--perms", "0755", "--dir", parent]
    argv += ["--bind", workdir, workdir, "--chdir", workdir]
    return argv


@cache
def _bwrap_problem() -> str:
    """Why bubblewrap cannot run programs here, or "" when a probe program runs under it."""
    if shutil.which("bwrap") is None:
        return "bwrap is not on PATH"
    result = _execute("print(6 * 7)", "", 0, Limits(), "bwrap", audit_hook=True)
    if result.status == "ok" and result.stdout == "42\n":
        return ""
    return f"bwrap cannot start a sandbox here ({result.reason})"


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
_kept = ()  # (stdlib dir, "/proc/self/fd/N") for each dir the run's uid reaches only through an fd
if _cfg["uid"] is not None:
    # 1) as root: switch to the run's own uid; keep an fd on each stdlib dir it cannot otherwise reach
    _roots = sorted({os.path.dirname(os.__file__), os.path.dirname(resource.__file__)})
    _roots = [r for r in _roots if not r.startswith(tuple(o + "/" for o in _roots))]  # lib-dynload is inside
    _fds = [os.open(r, os.O_PATH | os.O_DIRECTORY) for r in _roots]
    os.setgroups([])
    os.setgid(_cfg["uid"])
    os.setuid(_cfg["uid"])
    for _root, _fd in zip(_roots, _fds):
        if os.access(_root, os.R_OK | os.X_OK):
            os.close(_fd)
        else:
            _kept += ((_root, "/proc/self/fd/%d" % _fd),)
    _paths = [sys.path] + [getattr(m, "__path__", None) for m in list(sys.modules.values())]
    _paths = [p for p in _paths if isinstance(p, list)]
    for _root, _via in _kept:  # sys.path, and packages already imported (encodings loads codecs lazily)
        for _path in _paths:
            _path[:] = [_via + p[len(_root):] if p == _root or p.startswith(_root + "/") else p for p in _path]
os.chdir(_cfg["workdir"])
# 2) the kernel's limits; 3) a backstop for wall time should our process die (bwrap has its own)
for _name, _value in _cfg["rlimits"]:
    resource.setrlimit(getattr(resource, _name), _value)
_signal.alarm(_cfg["alarm"])
builtins.exit = builtins.quit = sys.exit  # site (-S) would have defined them

def _resolve(path, _kept=_kept, _lstat=os.lstat, _readlink=os.readlink, _islink=_stat.S_ISLNK):
    """(absolute ``path`` with symlinks resolved, its st_mode or None if it does not exist), without
    code the program could patch; under a kept stdlib dir it looks through the dir's fd."""
    todo, done, links, mode = path.split("/")[::-1], [], 0, None
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            done = done[:-1]
            continue
        here = "/" + "/".join(done + [part])
        reach = here
        for root, via in _kept:
            if here == root or here.startswith(root + "/"):
                reach = via + (here[len(root):] or "/.")  # "/.": the dir, not the fd's own magic link
        try:
            mode = _lstat(reach).st_mode
        except OSError:
            done, mode = done + [part], None
            continue
        if not _islink(mode):
            done = done + [part]
            continue
        links += 1
        if links > 40:
            raise PermissionError("sandbox: too many symbolic links in %r" % path)
        target = _readlink(reach)
        if target.startswith("/"):
            done = []
        todo.extend(target.split("/")[::-1])
    return "/" + "/".join(done), mode

def _audit(event, args, _p=None):
    """Refuse what the module docstring lists; everything it uses is bound in _p, out of the program's reach."""
    (work, reads, denied, devices, kept, path_events, blocked, blocked_prefixes, blocked_imports, protected,
     resolve, getcwd, isdir, fspath, isinstance, bytes, int, str, tuple, write_flags) = _p
    if event == "open" or event in path_events:
        if event == "open":  # (path, mode, flags): builtins.open gives a mode, os.open gives flags
            indices, opening = (0,), True
            writes = isinstance(args[2], int) and args[2] & write_flags != 0
            writes = writes or (isinstance(args[1], str) and args[1].strip("rbtU") != "")
        else:
            (indices, writes), opening = path_events[event], False
        for i in indices:
            path = "." if args[i] is None else args[i]
            if isinstance(path, int):
                # open(fd) wraps an fd the program holds; it may list the directories it holds fds on
                if writes and not opening:
                    raise PermissionError("sandbox: %s of a file descriptor is not allowed" % event)
                continue
            path = fspath(path)
            if isinstance(path, bytes):
                path = path.decode("utf-8", "surrogateescape")
            if path.startswith("/"):
                starts = ((path, writes, "outside the work dir"),)
            elif ".." in path.split("/"):
                raise PermissionError("sandbox: %s of %r is not allowed (.. in a relative path)" % (event, path))
            else:  # relative to the cwd, or with dir_fd= to a kept stdlib dir, which it may only read
                starts = ((getcwd() + "/" + path, writes, "outside the work dir"),) + tuple(
                    (root + "/" + path, False, "as a path in the standard library, where dir_fd= may point")
                    for root, _ in kept)
            for start, changes, where in starts:
                full, mode = resolve(start)
                if (full + "/").startswith(work) or full in devices:
                    continue
                if (not changes and (full + "/").startswith(reads) and not (full + "/").startswith(denied)
                        and not (opening and mode is not None and isdir(mode))):
                    continue
                raise PermissionError("sandbox: %s of %r is not allowed (%s)" % (event, path, where))
    elif event in blocked or event.startswith(blocked_prefixes):
        raise PermissionError("sandbox: %s is not allowed" % event)
    elif event == "import":  # (name, None, sys.path…), or (name, file, …) as an extension's native code loads
        native = args[1] is not None and resolve(fspath(args[1]))[0] + "/"
        if args[0].rpartition(".")[2] in blocked_imports or (
                native and not (native.startswith(reads) and not native.startswith(denied))):
            raise PermissionError("sandbox: importing %s is not allowed" % args[0])
    elif event in ("object.__setattr__", "object.__delattr__") and (args[1] == "__code__" or args[0] in protected):
        raise PermissionError("sandbox: changing %s is not allowed" % args[1])

if _cfg["audit"]:
    _stdlib = _resolve(os.path.dirname(os.__file__))[0]
    _dynload = _resolve(os.path.dirname(resource.__file__))[0]
    _frozendict = type(type.__dict__)  # mappingproxy: read-only, and the dict under it is out of reach
    _audit.__defaults__ = ((
        _resolve(_cfg["workdir"])[0] + "/",
        (_stdlib + "/", _dynload + "/"),
        (_stdlib + "/site-packages/", _stdlib + "/dist-packages/"),
        ("/dev/null", "/dev/urandom"),
        _kept,
        # event -> (indices of its path arguments, whether it changes files)
        _frozendict({
            "os.listdir": ((0,), False), "os.scandir": ((0,), False), "os.getxattr": ((0,), False),
            "os.listxattr": ((0,), False), "os.chdir": ((0,), True), "os.mkdir": ((0,), True),
            "os.remove": ((0,), True), "os.rmdir": ((0,), True), "os.rename": ((0, 1), True),
            "os.link": ((0, 1), True), "os.truncate": ((0,), True), "os.chmod": ((0,), True),
            "os.chown": ((0,), True), "os.utime": ((0,), True), "os.setxattr": ((0,), True),
            "os.removexattr": ((0,), True),
        }),
        frozenset({"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
                   "os.killpg", "os.symlink", "signal.pthread_kill", "subprocess.Popen", "resource.setrlimit",
                   "resource.prlimit", "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                   "gc.get_referents", "code.__new__"}),
        ("socket.", "ctypes.", "syslog."),
        # by the name's last part, which names the native code (PyInit_<name>), however it is imported
        frozenset({"_ctypes", "_posixsubprocess", "_posixshmem", "_xxsubinterpreters", "_testcapi",
                   "_testinternalcapi", "_testbuffer", "_testmultiphase", "_testimportmultiple", "_testclinic",
                   "_ctypes_test", "_xxtestfuzz"}),
        (_audit, _resolve),
        _resolve, os.getcwd, _stat.S_ISDIR, os.fspath, isinstance, bytes, int, str, tuple,
        os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
    ),)
    sys.addaudithook(_audit)

# 4) run main.py as __main__; surrogatepass: a lone surrogate reaches compile(), which names it
_main = type(sys)("__main__")
_main.__file__ = _cfg["main"]
sys.modules["__main__"] = _main
sys.argv = [_cfg["main"]]
with open(_cfg["main"], encoding="utf-8", errors="surrogatepass") as _f:
    _code = compile(_f.read(), _cfg["main"], "exec")
del _cfg, _f
exec(_code, _main.__dict__)
'''
