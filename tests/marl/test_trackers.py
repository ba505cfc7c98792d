"""``[log] report_to``: each tracker's output read back with its own library's reader holds what
``events.jsonl`` holds, once per iteration, also after a SIGKILL and a resume."""

import json
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from marl.config import ConfigError, load_config
from marl.trackers import scalars, transcript
from tests.runs import events, train_killed_after

EXAMPLES = Path(__file__).parents[2] / "examples"
ALL = '["tensorboard", "wandb", "mlflow"]'
SETTINGS = ["iterations=4", "checkpoint_every=2", "rollout.matches=8", "eval.every=2", "eval.matches=2", f"log.report_to={ALL}"]


# ---- each library's reader ----------------------------------------------------------------------


def tensorboard_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: _once({e.step: e.value for e in acc.Scalars(tag)}, [e.step for e in acc.Scalars(tag)]) for tag in acc.Tags()["scalars"]}


def tensorboard_texts(run_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"tensors": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Tensors(tag)] for tag in acc.Tags()["tensors"]}


def mlflow_run(run_dir: Path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    [experiment] = [e for e in client.search_experiments() if e.name == "coevo"]
    [run] = client.search_runs([experiment.experiment_id])
    history = {}
    for key in run.data.metrics:
        points = client.get_metric_history(run.info.run_id, key)
        history[key] = _once({p.step: p.value for p in points}, [p.step for p in points])
    return client, run, history


def wandb_records(run_dir: Path) -> list:
    """Every record of the run's offline ``.wandb`` files (one per process that ran it), in order.

    W&B's own Python reader of these files went with its Go core; they are LevelDB log files
    (a 7-byte header, then 32 KiB blocks of checksummed chunks) holding W&B's protobuf records,
    which W&B's own ``wandb_internal_pb2`` parses."""
    from wandb.proto import wandb_internal_pb2

    records = []
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        data, chunk = path.read_bytes(), b""
        assert data[:4] == b":W&B"
        pos = 7
        while pos + 7 <= len(data):
            if (pos % 32768) > 32768 - 7:  # a block's tail too short for a header is padding
                pos += 32768 - pos % 32768
                continue
            _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
            if kind == 0 or pos + 7 + length > len(data):  # zero padding, or the last chunk cut by the kill
                break
            chunk += data[pos + 7 : pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):  # FULL or LAST: a whole record
                record = wandb_internal_pb2.Record()
                record.ParseFromString(chunk)
                records.append(record)
                chunk = b""
    return records


def wandb_history(run_dir: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    steps: dict[str, list[int]] = {}
    for record in wandb_records(run_dir):
        if record.WhichOneof("record_type") != "history":
            continue
        step = record.history.step.num
        for item in record.history.item:
            key = item.key or "/".join(item.nested_key)
            value = json.loads(item.value_json)
            if isinstance(value, (int, float)) and not key.startswith("_"):
                out.setdefault(key, {})[step] = float(value)
                steps.setdefault(key, []).append(step)
    return {k: _once(v, steps[k]) for k, v in out.items()}


def wandb_config(run_dir: Path) -> dict:
    config = {}
    for record in wandb_records(run_dir):
        if record.WhichOneof("record_type") in ("run", "config"):
            items = record.run.config.update if record.HasField("run") else record.config.update
            config.update({item.key: json.loads(item.value_json) for item in items})
    return config


def _once(by_step: dict[int, float], steps: list[int]) -> dict[int, float]:
    assert len(steps) == len(set(steps)), f"a step logged twice: {sorted(steps)}"
    return by_step


def resolved(run_dir: Path) -> dict:
    return tomllib.loads((run_dir / "config.toml").read_text())


# ---- what events.jsonl says -----------------------------------------------------------------------


def expected(run_dir: Path, deterministic: bool = False) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for record in events(run_dir):
        if record["kind"] != "iteration":
            continue
        metrics = {k: v for k, v in record.items() if k not in ("timestamp", "run_id", "kind", "iteration")}
        for key, value in scalars(metrics).items():
            if not (deterministic and key.startswith("perf/")):
                out.setdefault(key, {})[record["iteration"]] = value
    return out


def assert_matches(found: dict[str, dict[int, float]], want: dict[str, dict[int, float]], rel: float = 0.0) -> None:
    """Every metric events.jsonl has, with the same iterations and values (``rel``: TensorBoard keeps float32)."""
    for key, by_step in want.items():
        assert key in found, f"{key} missing"
        got = {s: v for s, v in found[key].items() if s in by_step}
        assert sorted(found[key]) == sorted(by_step), f"{key}: steps {sorted(found[key])} != {sorted(by_step)}"
        assert got == pytest.approx(by_step, rel=rel, abs=rel), key


# ---- tests --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tracked(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("tracked")
    subprocess.run(
        [sys.executable, "-m", "coevo.cli", "train", str(EXAMPLES / "kuhn_tiny.toml"), *[a for s in SETTINGS for a in ("--set", s)],
         "--run-dir", str(run_dir), "--quiet"],
        check=True, capture_output=True,
    )  # fmt: skip
    return run_dir


def test_tensorboard_holds_every_metric_of_events_jsonl(tracked):
    want = expected(tracked)
    assert "kuhn/exploitability" in want and "eval/kuhn_poker/random/win" in want and "kuhn/strategy/Jb" in want
    assert_matches(tensorboard_scalars(tracked), want, rel=1e-6)
    texts = tensorboard_texts(tracked)
    assert texts["transcripts/text_summary"] == [1, 2, 3, 4]
    assert texts["config/text_summary"] == [0]


def test_mlflow_holds_every_metric_the_config_and_transcripts(tracked):
    client, run, history = mlflow_run(tracked)
    assert_matches(history, expected(tracked))
    assert run.data.params["optim.lr"] == str(resolved(tracked)["optim"]["lr"])
    assert run.data.params["games.kuhn_poker"] == "1.0"
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "transcripts")]
    assert artifacts == [f"transcripts/iter_{i:06d}.txt" for i in range(1, 5)]
    text = client.download_artifacts(run.info.run_id, "transcripts/iter_000001.txt", str(tracked / "downloaded"))
    assert "kuhn_poker" in Path(text).read_text() and "player_0" in Path(text).read_text()


def test_wandb_offline_run_holds_every_metric_and_the_config(tracked):
    assert_matches(wandb_history(tracked), expected(tracked))
    config = wandb_config(tracked)
    assert config["optim"]["lr"] == resolved(tracked)["optim"]["lr"]
    tables = {
        r.history.step.num: json.loads(i.value_json)
        for r in wandb_records(tracked) if r.WhichOneof("record_type") == "history"
        for i in r.history.item if list(i.nested_key) == ["transcripts", "path"]
    }  # fmt: skip
    assert sorted(tables) == [1, 2, 3, 4]
    [files] = (tracked / "wandb").glob("offline-run-*/files")
    table = json.loads((files / tables[1]).read_text())
    assert table["columns"] == ["iteration", "match", "transcript"] and "kuhn_poker" in table["data"][0][2]


@pytest.mark.parametrize("killed_after", [1, 3])
def test_a_killed_and_resumed_run_continues_each_tracker_run_without_a_step_twice(tmp_path, killed_after):
    """Killed after iteration 1 (before the first checkpoint: made again from the start, in new
    tracker runs) or 3 (resumed from the checkpoint at 2 in the same tracker runs, iteration 3
    played again): each tracker holds each iteration once, with events.jsonl's values, in one run."""
    args = [str(EXAMPLES / "kuhn_tiny.toml"), *[a for s in SETTINGS for a in ("--set", s)]]
    train_killed_after(args, tmp_path, iteration=killed_after)
    first_ids = json.loads((tmp_path / "trackers.json").read_text())
    subprocess.run([sys.executable, "-m", "coevo.cli", "train", "--resume", str(tmp_path), "--quiet"], check=True, capture_output=True)
    ids = json.loads((tmp_path / "trackers.json").read_text())
    same = {k: v.get("id") for k, v in ids.items()} == {k: v.get("id") for k, v in first_ids.items()}
    assert same == (killed_after >= 2)  # resumed from a checkpoint: the same tracker runs; else new ones
    want = expected(tmp_path, deterministic=True)  # the replay's timings differ from the first try's
    assert_matches(tensorboard_scalars(tmp_path), want, rel=1e-6)
    assert_matches(mlflow_run(tmp_path)[2], want)
    assert_matches(wandb_history(tmp_path), want)
    assert {r.run.run_id for r in wandb_records(tmp_path) if r.HasField("run")} == {ids["wandb"]["id"]}


def test_transcript_is_a_readable_match():
    episode = {
        "match_id": "kuhn_poker-7", "game": "kuhn_poker", "members": {"player_0": "policy", "player_1": "policy"},
        "turns": [
            {"index": 0, "seat": "player_0", "member": "policy", "text": " bet", "valid": True, "move": "bet", "reason": ""},
            {"index": 1, "seat": "player_1", "member": "policy", "text": "uh", "valid": False, "move": None, "reason": "no move"},
        ],
        "rewards": {"player_0": 1.0, "player_1": -1.0}, "forfeited_by": "player_1", "truncated": False,
    }  # fmt: skip
    assert transcript(episode).splitlines() == [
        "kuhn_poker-7 · kuhn_poker · player_0: policy, player_1: policy",
        "1. player_0 (policy): 'bet' → bet",
        "2. player_1 (policy): 'uh' ✗ invalid: no move",
        "player_1 forfeited: player_0 +1, player_1 -1",
    ]


def test_scalars_flatten_tables_and_leave_out_text():
    assert scalars({"a": 1, "b": {"c": 2.5, "d": {"e": 3}}, "s": "x", "l": [1], "t": True}) == {"a": 1.0, "b/c": 2.5, "b/d/e": 3.0}


def test_an_unknown_tracker_or_a_missing_package_is_one_line_naming_the_field(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"log\.report_to\.0: .*tensorboard.*wandb.*mlflow"):
        load_config(EXAMPLES / "kuhn_tiny.toml", ['log.report_to=["comet"]'])
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"log\.report_to: .*wandb is not installed: pip install 'coevo\[wandb\]'"):
        load_config(EXAMPLES / "kuhn_tiny.toml", ['log.report_to=["wandb"]'])
