"""coevo watch: follows a run as it is written, and stops when it ends."""

import io
import subprocess
import sys
import threading

from rich.console import Console
from typer.testing import CliRunner

from analysis.watch import EventTail, watch
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


def test_a_killed_run_times_out_with_exit_code_one(killed_run):
    result = CliRunner().invoke(app, ["watch", str(killed_run), "--interval", "0.05", "--timeout", "0.3"], env={"COLUMNS": "160"})
    assert result.exit_code == 1, result.output
    assert "iteration 2/50" in result.output and "running or stopped" in result.output


def test_not_a_directory_is_one_line_and_exit_code_two(tmp_path):
    result = CliRunner().invoke(app, ["watch", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "not a directory" in result.output


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
