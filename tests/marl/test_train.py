"""Self-play training end to end: config errors, a short run, exact resume after SIGKILL, SmolLM2."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from coevo.cli import app
from marl.config import ConfigError, load_config
from marl.train import Trainer

runner = CliRunner()

SHORT_KUHN = """
seed = 1
iterations = {iterations}
model = "tiny"
mode = "choose"
checkpoint_every = 2
[games]
kuhn_poker = 1.0
[rollout]
matches = 16
concurrency = 16
[optim]
lr = 1e-3
micro_batch = 64
entropy_coef = 0.1
[eval]
every = 2
matches = 4
opponents = ["random", "initial", "past:1"]
"""


def write(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, field",
    [
        ("iterations = 3\nbogus = 1", "bogus"),
        ("iterations = 'many'", "iterations"),
        ("[games]\nchess = 1.0", "games"),
        ("model = 'gpt-9'", "model"),
        ("mode = 'choose'\n[games]\nsimple_negotiation = 1.0", "choose"),
        ("[rollout]\ninvalid = 'sometimes'", "rollout.invalid"),
        ("[optim]\nlr = -1", "optim.lr"),
    ],
)
def test_config_errors_are_one_line_naming_the_field(tmp_path, text, field):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert field in str(err.value) and "\n" not in str(err.value)
    run_dir = tmp_path / "run"
    result = runner.invoke(app, ["train", str(tmp_path / "c.toml"), "--run-dir", str(run_dir), "--quiet"])
    assert result.exit_code == 2 and "config error" in result.output
    assert not run_dir.exists(), "nothing is written for a bad config"


def events(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()]


def test_a_short_run_writes_the_run_directory(tmp_path):
    config = load_config(write(tmp_path, SHORT_KUHN.format(iterations=2)))
    trainer = Trainer(config, tmp_path / "run")
    before = {n: p.clone() for n, p in trainer.policy.model.named_parameters()}
    trainer.run()
    unchanged = [n for n, p in trainer.policy.model.named_parameters() if torch.equal(p, before[n])]
    assert not unchanged, f"parameters not updated: {unchanged}"
    records = events(tmp_path / "run")
    assert [r["kind"] for r in records] == ["start", "iteration", "iteration", "checkpoint"]  # every 2
    last = [r for r in records if r["kind"] == "iteration"][-1]
    for key in ("kuhn/exploitability", "kuhn_poker/player_0/return", "kuhn_poker/player_1/baseline",
                "policy/grad_norm", "ppo/clipfrac", "policy/entropy", "perf/rollout_tokens_per_s",
                "perf/learner_tokens_per_s", "eval/kuhn_poker/random/win", "eval/kuhn_poker/initial/return"):  # fmt: skip
        assert key in last, key
    assert all(r["run_id"] == "run" for r in records)
    assert sorted(p.name for p in (tmp_path / "run" / "episodes").iterdir()) == ["iter_000001.jsonl", "iter_000002.jsonl"]
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text() == "iter_000002"
    assert load_config(tmp_path / "run" / "config.toml") == config


def comparable(records):
    """Iteration events without wall-clock fields and the run's own name."""
    return [
        {k: v for k, v in r.items() if k not in ("timestamp", "run_id") and not k.startswith("perf/")}
        for r in records if r["kind"] == "iteration"
    ]  # fmt: skip


@pytest.mark.slow
def test_a_killed_run_resumes_exactly(tmp_path):
    config = write(tmp_path, SHORT_KUHN.format(iterations=5))
    whole = tmp_path / "whole"
    assert runner.invoke(app, ["train", str(config), "--run-dir", str(whole), "--quiet"]).exit_code == 0
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coevo.cli", "train", str(config), "--run-dir", str(killed), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.time() + 300
    while time.time() < deadline:  # kill it mid-way: after iteration 3 is logged, before 4 is
        if (killed / "events.jsonl").exists() and '"iteration": 3, "kind": "iteration"' in (killed / "events.jsonl").read_text():
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    result = runner.invoke(app, ["train", "--resume", str(killed), "--quiet"])
    assert result.exit_code == 0, result.output
    assert comparable(events(killed)) == comparable(events(whole))
    iterations = [r["iteration"] for r in events(killed) if r["kind"] == "iteration"]
    assert iterations == [1, 2, 3, 4, 5], "no gaps and no duplicates"
    shards = sorted(p.name for p in (killed / "episodes").iterdir())
    assert shards == [f"iter_{i:06d}.jsonl" for i in range(1, 6)]
    for name in shards:
        assert (killed / "episodes" / name).read_text() == (whole / "episodes" / name).read_text()


@pytest.mark.slow
def test_smollm2_free_text_lora_run(tmp_path):
    config = write(
        tmp_path,
        """
iterations = {n}
model = "smollm2-135m"
mode = "generate"
checkpoint_every = 1
[games]
kuhn_poker = 1.0
[rollout]
matches = 4
max_new_tokens = 16
invalid = "random_legal"
[lora]
r = 4
[optim]
micro_batch = 4
token_normalizer = 16
[eval]
every = 0
""",
    )
    config.write_text(config.read_text().replace("{n}", "2"))
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", str(config), "--run-dir", str(run), "--quiet"])
    assert result.exit_code == 0, result.output
    its = [r for r in events(run) if r["kind"] == "iteration"]
    assert len(its) == 2 and all(r["policy/grad_norm"] > 0 for r in its)
    assert (run / "checkpoints" / "iter_000002" / "state.pt").exists()
    (run / "config.toml").write_text((run / "config.toml").read_text().replace("iterations = 2", "iterations = 3"))
    result = runner.invoke(app, ["train", "--resume", str(run), "--quiet"])
    assert result.exit_code == 0, result.output
    assert [r["iteration"] for r in events(run) if r["kind"] == "iteration"] == [1, 2, 3]
