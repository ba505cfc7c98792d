"""coevo watch: follows a run as it is written, and stops when it ends."""

import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from analysis.run_state import LOCK, ago, is_running
from analysis.watch import EventTail, watch
from coevo import cli
from coevo.cli import app
from tests.analysis.conftest import EXAMPLES


def screen() -> Console:
    return Console(file=io.StringIO(), width=140, force_terminal=False)


def test_a_finished_run_is_shown_and_watch_returns_at_once(kuhn_run):
    console = screen()
    assert watch(kuhn_run, console, interval=0.05, timeout=30)
    out = console.file.getvalue()
    assert "iteration 3/3" in out and "finished" in out
    assert "kuhn/exploitability" in out and "last match it3-" in out


def test_a_running_run_is_followed_until_it_ends(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coevo.cli", "train", str(EXAMPLES / "task_forge_scripted.toml"), "--iterations", "4",
         "--set", "rollout.matches=8", "--set", "eval.every=0", "--run-dir", str(run), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        console = screen()
        assert watch(run, console, interval=0.1, timeout=300)  # started before the run wrote anything
    finally:
        proc.wait(timeout=60)
    out = console.file.getvalue()
    assert "iteration 4/4" in out and "forge/p_hat" in out and "last match it4-" in out


def test_a_killed_run_is_reported_stopped_and_watch_returns(killed_run, monkeypatch):
    monkeypatch.setattr(cli, "console", Console(width=250))  # a wide terminal, whatever the test runner's is
    start = time.monotonic()
    result = CliRunner().invoke(app, ["watch", str(killed_run), "--interval", "0.05", "--timeout", "60"])
    assert time.monotonic() - start < 30, "watch waited for a run that will never write again"
    assert result.exit_code == 1, result.output
    assert "iteration 2/50" in result.output and "stopped at iteration 2 of 50 · last write" in result.output
    flat = " ".join(result.output.split())
    assert f"resume with coevo train --resume {killed_run} (no checkpoint yet: it starts again)" in flat  # checkpoint_every = 10


def test_not_a_directory_is_one_line_and_exit_code_two(tmp_path):
    result = CliRunner().invoke(app, ["watch", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "not a directory" in result.output


@pytest.mark.parametrize("junk", [[], ["notes.txt"]], ids=["empty", "other files"])
def test_a_folder_that_is_not_a_run_is_one_line_and_exit_code_two(junk, tmp_path):
    for name in junk:
        (tmp_path / name).write_text("")
    result = CliRunner().invoke(app, ["watch", str(tmp_path), "--timeout", "30"])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert "is not a run directory" in line and "config.toml and events.jsonl" in line


def fake_run(folder: Path, logged: int = 7, planned: int = 10, checkpoint: int | None = 5, ended: bool = False) -> Path:
    """A run directory as a trainer leaves it after ``logged`` iterations (and its end, if ``ended``)."""
    folder.mkdir()
    (folder / "config.toml").write_text(f"iterations = {planned}\n")
    lines = [{"kind": "start", "iteration": 0, "run_id": "fake"}]
    lines += [{"kind": "iteration", "iteration": i, "loss/policy": 0.5} for i in range(1, logged + 1)]
    lines += [{"kind": "end", "iteration": logged}] if ended else []
    (folder / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if checkpoint is not None:
        (folder / "checkpoints" / f"iter_{checkpoint:06d}").mkdir(parents=True)
        (folder / "checkpoints" / f"iter_{checkpoint:06d}" / "state.json").write_text(json.dumps({"iteration": checkpoint}))
        (folder / "checkpoints" / "latest").write_text(f"iter_{checkpoint:06d}")
    return folder


@pytest.fixture
def trainer_lock():
    """Holds a run's lock from another process, as a running trainer does, until the test ends."""
    procs = []

    def hold(run_dir: Path) -> None:
        code = (
            "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(120)"
        )
        proc = subprocess.Popen([sys.executable, "-c", code, str(run_dir / LOCK)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline() == "held\n"

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def watch_in_a_thread(run_dir: Path, timeout: float | None) -> tuple[bool | None, str, float]:
    """``watch`` with a guard: (what it returned, or None if it was still watching after 30 s; screen; seconds)."""
    console, returned = screen(), []
    start = time.monotonic()
    thread = threading.Thread(target=lambda: returned.append(watch(run_dir, console, interval=0.05, timeout=timeout)), daemon=True)
    thread.start()
    thread.join(30)
    return (returned[0] if returned else None), console.file.getvalue(), time.monotonic() - start


def test_a_run_whose_trainer_holds_the_lock_is_running(tmp_path, trainer_lock):
    run = fake_run(tmp_path / "run")
    trainer_lock(run)
    returned, out, seconds = watch_in_a_thread(run, timeout=0.5)
    assert returned is False and seconds >= 0.5  # followed until the timeout: a running run may write more
    assert "running · last write" in out and "s ago" in out and "stopped" not in out


@pytest.mark.parametrize("lock_file", [False, True], ids=["no lock file", "lock released"])
def test_a_run_no_trainer_holds_is_stopped_and_watch_returns_at_once(lock_file, tmp_path):
    run = fake_run(tmp_path / "run")
    if lock_file:
        (run / LOCK).write_text("")  # left by a trainer that ended: the kernel released its lock
    returned, out, seconds = watch_in_a_thread(run, timeout=None)
    assert returned is False, "watch waited for a run that will never write again"
    said = f"stopped at iteration 7 of 10 · last write 0 s ago — resume with coevo train --resume {run} (from its checkpoint at iteration 5)"
    assert said in " ".join(out.split())


def test_a_lock_is_read_without_being_taken(tmp_path, trainer_lock):
    run = fake_run(tmp_path / "run")
    assert not is_running(run)
    (run / LOCK).write_text("")
    assert not is_running(run) and not is_running(run)  # a reader releases what it obtained
    trainer_lock(run)
    assert is_running(run)


def test_a_finished_run_is_finished_even_while_its_lock_is_still_held(tmp_path, trainer_lock):
    run = fake_run(tmp_path / "run", logged=10, checkpoint=10, ended=True)
    trainer_lock(run)  # the trainer logged its end and has not exited yet
    returned, out, _ = watch_in_a_thread(run, timeout=30)
    assert returned is True and "finished · last write" in out


def test_a_stopped_run_without_a_checkpoint_says_resuming_starts_it_again(tmp_path):
    run = fake_run(tmp_path / "run", logged=0, checkpoint=None)
    returned, out, _ = watch_in_a_thread(run, timeout=None)
    assert returned is False and f"--resume {run} (no checkpoint yet: it starts again)" in " ".join(out.split())


@pytest.mark.parametrize(
    "seconds, said", [(0.2, "0 s ago"), (12, "12 s ago"), (200, "3 min ago"), (7300, "2 h ago"), (4 * 86400, "4 days ago")]
)
def test_how_long_ago_reads(seconds, said):
    assert ago(seconds) == said


def test_the_tail_reads_complete_lines_only_and_restarts_on_a_rewrite(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = EventTail(path)
    assert tail.poll() == []
    path.write_text('{"kind": "start", "iteration": 0}\n{"kind": "iter')
    assert [e["kind"] for e in tail.poll()] == ["start"]
    with open(path, "a") as f:
        f.write('ation", "iteration": 1}\n')
    assert [e["iteration"] for e in tail.poll()] == [1]
    path.write_text('{"kind": "start", "iteration": 0}\n')  # a resume rewrote the file, shorter
    assert [e["kind"] for e in tail.poll()] == ["start"] and len(tail.events) == 1


def test_the_tail_survives_a_writer_appending_concurrently(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("")
    lines = [f'{{"kind": "iteration", "iteration": {i}, "pad": "{"x" * 500}"}}\n' for i in range(300)]

    def write():
        with open(path, "a") as f:
            for line in lines:
                for piece in (line[:100], line[100:300], line[300:]):  # each line in pieces, flushed between them
                    f.write(piece)
                    f.flush()

    tail = EventTail(path)
    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        tail.poll()
    writer.join()
    tail.poll()
    assert [e["iteration"] for e in tail.events] == list(range(300))


def test_a_run_stopped_after_checkpointing_its_last_iteration_is_finished(tmp_path):
    run = fake_run(tmp_path / "run", logged=10, checkpoint=10, ended=False)  # killed before it logged its end
    returned, out, _ = watch_in_a_thread(run, timeout=None)
    assert returned is True and "finished" in out  # as coevo train --resume says: nothing left to do
