"""Experiment trackers beside ``events.jsonl``: ``[log] report_to = ["tensorboard", "wandb", "mlflow"]``.

As in TRL, a run reports to the trackers its researchers already use, each the library's own
writer: the same metric names and iterations as ``events.jsonl`` (nested tables such as
``kuhn/strategy`` flattened to ``kuhn/strategy/Jb``), the resolved config as hyper-parameters,
and a few of each iteration's matches as text. Each library is an optional extra imported only
when a run asks for it (``marl.config`` refuses a missing one at load, naming the extra).

Where each writes, unless the user's environment says otherwise (as the libraries read it):

- TensorBoard: ``RUN_DIR/tensorboard`` (``tensorboard --logdir RUN_DIR``).
- W&B: offline under ``RUN_DIR/wandb`` (``WANDB_MODE=online`` to stream; project ``coevo`` or
  ``WANDB_PROJECT``); ``wandb sync`` uploads an offline run later.
- MLflow: a SQLite store ``RUN_DIR/mlflow.db`` with artifacts in ``RUN_DIR/mlartifacts``
  (``MLFLOW_TRACKING_URI`` for a server; experiment ``coevo`` or ``MLFLOW_EXPERIMENT_NAME``).
  MLflow 3 refuses its old file store, so the default is the local database it recommends.

Resume: a resumed run continues the same tracker run, and each tracker holds each iteration once.
A tracker opens at the checkpoint the run resumes from (iteration ``c``) and is then sent, from
``events.jsonl`` and the episode shards, whatever of iterations 1…c it may lack; after that, each
iteration as it ends. What each holds of iterations after ``c`` (played before the kill, and
played again now) is the library's to settle:

- TensorBoard drops everything after ``c`` (its own ``purge_step``), so it gets the replay.
- MLflow cannot delete a point, so it keeps what it holds: its last iteration is a metric of its
  own, in the same ``log_batch`` as that iteration's metrics (one transaction: a tag is not, as
  MLflow commits a batch's tags after its metrics, and a kill between them once logged an
  iteration twice), and later ones are sent. The replay
  reproduces every value (``coevo.train``) but the wall-clock ``perf/*`` timings.
- W&B's writer buffers, and a killed process loses what it buffered; so an offline run is
  written again whole on resume (the killed process's files replaced), and an online run is sent
  1…c again, of which the server keeps the steps it lacks (W&B drops a step below its last).

A run made again from the start (killed before its first checkpoint) starts new tracker runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from marl.rundir import write_text

TRACKERS = ("tensorboard", "wandb", "mlflow")  # each the name of its package and of coevo's extra
STATE_FILE = "trackers.json"
PROJECT = "coevo"  # W&B project and MLflow experiment, unless the environment names another
MLFLOW_BATCH = 1000  # MLflow's limit on metrics per log_batch (and 100 on params)
MLFLOW_MARK = "coevo.logged_iteration"  # a metric: the last iteration MLflow holds


def scalars(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers among ``metrics``, nested tables flattened with ``/``; text and lists left out."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(scalars(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def hyperparameters(config: Mapping[str, Any], prefix: str = "") -> dict[str, int | float | str | bool]:
    """The config as flat ``table.key`` values, lists as JSON: every tracker's hyper-parameter form."""
    out: dict[str, int | float | str | bool] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(hyperparameters(value, f"{name}."))
        else:
            out[name] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value)
    return out


def transcript(episode: Mapping[str, Any]) -> str:
    """One recorded match (an ``episodes/`` line) as plain text: who played, what each wrote, how it ended."""
    seats = ", ".join(f"{seat}: {member}" for seat, member in episode["members"].items())
    lines = [f"{episode['match_id']} · {episode['game']} · {seats}"]
    for turn in episode["turns"]:
        verdict = f"→ {turn['move']}" if turn["valid"] else f"✗ invalid: {turn['reason']}"
        lines.append(f"{turn['index'] + 1}. {turn['seat']} ({turn['member']}): {turn['text'].strip()!r} {verdict}")
    rewards = ", ".join(f"{seat} {reward:+g}" for seat, reward in episode["rewards"].items())
    ending = f"{episode['forfeited_by']} forfeited" if episode.get("forfeited_by") else "truncated" if episode.get("truncated") else "played out"
    lines.append(f"{ending}: {rewards}")
    return "\n".join(lines)


class Tracker(Protocol):
    logged: int  # the last iteration this tracker holds; later ones are sent
    state: dict  # what a resumed run needs to reopen it (trackers.json): its run's id

    def log(self, iteration: int, metrics: dict[str, float], transcripts: list[str]) -> None: ...

    def close(self) -> None: ...


class TensorBoard:
    def __init__(self, run_dir: Path, state: dict | None, config: dict, resumed: int):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        folder = run_dir / "tensorboard"
        if not resumed:
            shutil.rmtree(folder, ignore_errors=True)
        self.writer = SummaryWriter(str(folder), purge_step=resumed + 1 if resumed else None)
        self.logged = resumed  # flushed with each iteration, so it holds every one up to the checkpoint
        self.state: dict = {}
        if not resumed:  # a new run: its config, as text and in the hyper-parameter view
            self.writer.add_text("config", _code(json.dumps(config, indent=2)), 0)
            for summary in hparams(hyperparameters(config), {}):
                self.writer.file_writer.add_summary(summary)
            self.writer.flush()

    def log(self, iteration: int, metrics: dict[str, float], transcripts: list[str]) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, iteration)
        if transcripts:
            self.writer.add_text("transcripts", "\n\n".join(map(_code, transcripts)), iteration)
        self.writer.flush()
        self.logged = iteration

    def close(self) -> None:
        self.writer.close()


class WandB:
    def __init__(self, run_dir: Path, state: dict | None, config: dict, resumed: int):
        import wandb

        self.wandb = wandb
        mode = os.environ.get("WANDB_MODE", "offline")
        if mode == "offline":  # written again whole: what a killed process buffered is lost
            for folder in (run_dir / "wandb").glob("offline-run-*"):
                shutil.rmtree(folder)
        self.state = state if resumed and state else {"id": uuid.uuid4().hex[:12]}
        self.logged = 0
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", PROJECT), name=run_dir.name, id=self.state["id"], resume="allow",
            dir=str(run_dir), mode=mode, config=config, settings=wandb.Settings(console="off", silent=True),
            reinit="create_new",
        )  # fmt: skip

    def log(self, iteration: int, metrics: dict[str, float], transcripts: list[str]) -> None:
        record: dict[str, Any] = dict(metrics)
        if transcripts:
            rows = [[iteration, i, text] for i, text in enumerate(transcripts)]
            record["transcripts"] = self.wandb.Table(columns=["iteration", "match", "transcript"], data=rows)
        self.run.log(record, step=iteration, commit=True)  # written now, not when the next step opens
        self.logged = iteration

    def close(self) -> None:
        self.run.finish()


class MLflow:
    def __init__(self, run_dir: Path, state: dict | None, config: dict, resumed: int):
        from mlflow import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
        self.client = MlflowClient(uri)
        if state and not resumed:  # the run is made again from the start: so is its MLflow run
            self.client.delete_run(state["id"])
        if not (state and resumed):
            state = {"id": self._new_run(run_dir)}
            self._params(state["id"], config)
        self.state, self.id = state, state["id"]
        self.logged = int(self.client.get_run(self.id).data.metrics.get(MLFLOW_MARK, 0))

    def _new_run(self, run_dir: Path) -> str:
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", PROJECT)
        found = self.client.get_experiment_by_name(name)
        artifacts = None if "MLFLOW_TRACKING_URI" in os.environ else (run_dir / "mlartifacts").resolve().as_uri()
        experiment = found.experiment_id if found else self.client.create_experiment(name, artifact_location=artifacts)
        return self.client.create_run(experiment, run_name=run_dir.name).info.run_id

    def _params(self, run_id: str, config: dict) -> None:
        from mlflow.entities import Param

        params = [Param(k, str(v)) for k, v in hyperparameters(config).items()]
        for start in range(0, len(params), 100):
            self.client.log_batch(run_id, params=params[start : start + 100])

    def log(self, iteration: int, metrics: dict[str, float], transcripts: list[str]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        points = [Metric(_mlflow_key(k), v, now, iteration) for k, v in metrics.items()]
        points.append(Metric(MLFLOW_MARK, iteration, now, iteration))  # last: it commits with the iteration's last batch
        for start in range(0, len(points), MLFLOW_BATCH):
            self.client.log_batch(self.id, metrics=points[start : start + MLFLOW_BATCH])
        if transcripts:
            self.client.log_text(self.id, "\n\n".join(transcripts), f"transcripts/iter_{iteration:06d}.txt")
        self.logged = iteration

    def close(self) -> None:
        self.client.set_terminated(self.id)


KINDS: dict[str, type] = {"tensorboard": TensorBoard, "wandb": WandB, "mlflow": MLflow}


class Trackers:
    """Every tracker a run reports to, each sent what ``events.jsonl`` records, once per iteration.

    ``resumed``: the checkpoint's iteration the run goes on from; 0 for a run (made again) from the start.
    """

    def __init__(self, names: list[str], run_dir: Path, config: dict, transcripts: int, resumed: int):
        self.run_dir = Path(run_dir)
        self.transcripts = transcripts
        path = self.run_dir / STATE_FILE
        state = json.loads(path.read_text()) if path.exists() else {}
        self.trackers: dict[str, Tracker] = {
            name: KINDS[name](self.run_dir, state.get(name), config, resumed) for name in names
        }  # fmt: skip
        if not self.trackers:
            return
        write_text(path, json.dumps({name: t.state for name, t in self.trackers.items()}))
        for iteration, metrics in _iterations(self.run_dir / "events.jsonl"):  # what a tracker lacks of iterations 1…resumed
            self.log(iteration, metrics)

    def log(self, iteration: int, metrics: Mapping[str, Any]) -> None:
        """Send ``iteration``'s metrics and sampled matches to every tracker that lacks them."""
        behind = [t for t in self.trackers.values() if t.logged < iteration]
        if not behind:
            return
        numbers, texts = scalars(metrics), self._transcripts(iteration)
        for tracker in behind:
            tracker.log(iteration, numbers, texts)

    def _transcripts(self, iteration: int) -> list[str]:
        """The iteration's first matches, as its episode shard records them."""
        shard = self.run_dir / "episodes" / f"iter_{iteration:06d}.jsonl"
        if not self.transcripts or not shard.exists():
            return []
        with open(shard, encoding="utf-8") as f:
            return [transcript(json.loads(line)) for line, _ in zip(f, range(self.transcripts))]

    def close(self) -> None:
        for tracker in self.trackers.values():
            tracker.close()


def _iterations(events: Path) -> list[tuple[int, dict]]:
    """Each iteration record of ``events.jsonl``: its number, and its metrics as the trainer gave them."""
    if not events.exists():
        return []
    records = (json.loads(line) for line in events.read_text(encoding="utf-8").splitlines())
    bookkeeping = ("timestamp", "run_id", "kind", "iteration")
    return [(r["iteration"], {k: v for k, v in r.items() if k not in bookkeeping}) for r in records if r.get("kind") == "iteration"]


def _code(text: str) -> str:
    """Text as a Markdown code block (TensorBoard renders its text as Markdown)."""
    return "\n".join("    " + line for line in text.splitlines())


_MLFLOW_UNSAFE = re.compile(r"[^\w\-. /:]")


def _mlflow_key(name: str) -> str:
    """MLflow takes letters, digits, ``_ - . / :`` and spaces in a key (on POSIX); anything else becomes ``_``."""
    return _MLFLOW_UNSAFE.sub("_", name)
