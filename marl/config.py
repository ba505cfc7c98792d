"""Training configuration: pydantic models loaded from TOML. Unknown keys are errors, and every
error is reported as one line naming the field (``ConfigError``).

A config may start from another (``extends = "kuhn_tiny.toml"``, relative to it) and change only
what differs, as ablations do; ``coevo train --set optim.lr=1e-3`` changes one value at launch.
Both merge tables key by key; ``replace`` and ``:=`` replace a table whole (``FILE_KEYS``)."""

from __future__ import annotations

import importlib.util
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import games
from games.core import ACTION_MAX_CHARS, choosable
from marl.device import resolve_device
from marl.estimators import ESTIMATORS, OUTCOME_ESTIMATORS
from marl.learner import OptimConfig
from marl.players import MODELS, check_hf_model
from marl.trackers import TRACKERS
from roles.seat import InvalidMoves, demonstrations


FILE_KEYS = {  # keys of a config file that are not config values: how files compose, as the schema documents them
    "extends": {
        "type": "string",
        "description": "start from this config (a path relative to this file): its tables are merged key by key with this "
        "file's, this file's values winning",
    },
    "replace": {
        "type": "array", "items": {"type": "string"},
        "description": "dotted names of tables this file replaces whole instead of merging into the extended config's "
        "(e.g. ['games'] for a single-game config from a mixture); on the command line: --set games:={tictactoe=1.0}",
    },
}  # fmt: skip


class Resources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpus: float = Field(1.0, gt=0, description="CPUs per actor")
    gpus: float = Field(0.0, ge=0, description="GPUs per actor; fractions in (0, 1) share a device")


class PoolConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = Field("local", description="local: this process; ray: Ray actors")
    address: str | None = Field(
        None, description="join this Ray cluster ('auto', 'host:6379', 'ray://host:10001'); unset = start a local Ray"
    )
    num_cpus: int | None = Field(
        None, ge=1,
        description="CPUs of a local Ray (default: the machine's, or as many as the pool's actors ask for if more: "
        "in sync training the learner and the rollout workers take turns, so they never compete for the cores)",
    )  # fmt: skip
    num_gpus: float | None = Field(
        None, ge=0, description="GPUs of a local Ray (default: the machine's); logical ones schedule on a CPU box"
    )
    rollout_workers: int = Field(2, ge=1, description="rollout actors sharing each iteration's matches")
    batch_matches: int = Field(
        0, ge=0,
        description="matches handed to a rollout worker at a time, the next batch to whichever worker frees up first "
        "(ROLL Flash's queue scheduling: a slow worker or a long match stalls no one); 0 = two batches per worker",
    )  # fmt: skip
    rollout: Resources = Field(Resources(), description="per rollout worker")
    learner: Resources = Field(Resources(), description="per learner (one per trained role)")
    strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "PACK", description="placement of the role's bundles: PACK colocates, SPREAD spreads over nodes"
    )
    max_restarts: int = Field(3, ge=0, description="times Ray restarts a dead actor")


class ConfigError(ValueError):
    """A bad config, as one line: ``path: field: what is wrong``."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolloutConfig(Strict):
    matches: int = Field(64, ge=1, description="matches played per iteration")
    concurrency: int = Field(64, ge=1, description="matches in flight at once (the largest model batch)")
    temperature: float = Field(1.0, ge=0, description="sampling temperature (SPIRAL: 1.0); in choose mode, over move log-probs")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling (SPIRAL: 1.0)")
    max_new_tokens: int = Field(64, ge=1, description="tokens a model may write per turn (SPIRAL: 4096)")
    invalid: str = Field("forfeit", description="invalid output: forfeit | retry:N | random_legal (SPIRAL: forfeit)")
    invalid_penalty: float = Field(-1.0, description="offender's reward on an invalid move (SPIRAL trains with -1.5)")
    opponent_reward: float = Field(1.0, description="the other seat's reward on a forfeit (SPIRAL trains with +0.5)")
    compact_prompts: bool = Field(
        False,
        description="the state alone as plain text, moves bare (no rules, chat template or \\boxed{}): for small "
        "models trained from scratch, which then decide right on the state's last line",
    )
    demonstration: bool = Field(
        False,
        description="free text: show one example turn (the game's opening state and a legal move in \\boxed{}) "
        "before the model's own, as a chat exchange: SmolLM2-135M then writes the format about a fifth of the time "
        "instead of almost never; it also copies the example's move, so that move is drawn per turn among the legal "
        "opening moves (docs/training.md)",
    )

    parse: Literal["strict", "lenient"] = Field(
        "strict",
        description="reading free-text moves: strict: the \\boxed{} answer, or else the whole output, must be a "
        "move; lenient: also an answer or output that names exactly one move (a guess: 'I will not bet' reads as bet)",
    )
    score_batch_tokens: int = Field(
        0, ge=0, description="padded tokens per forced-choice scoring pass at most, a memory bound; 0 = 64 candidates a pass"
    )
    decode: Literal["auto", "generate", "static"] = Field(
        "auto",
        description="free-text decoding loop: generate: transformers' generate; static: a KV cache allocated once, no "
        "host sync per token (marl.decode); auto: static on a GPU, generate on the CPU (where it is faster)",
    )
    compile: bool = Field(
        False, description="torch.compile the static loop's step (CUDA graphs on a GPU): minutes of compiling per shape first"
    )
    max_output_chars: int = Field(
        ACTION_MAX_CHARS, ge=1, description="a turn's output is cut to this many characters before parsing (Turn.cut_chars)"
    )

    @field_validator("invalid")
    @classmethod
    def _known_rule(cls, value: str) -> str:
        InvalidMoves.parse(value)
        return value

    @property
    def invalid_moves(self) -> InvalidMoves:
        return InvalidMoves.parse(self.invalid, self.invalid_penalty, self.opponent_reward)


EstimatorName = Literal[tuple(ESTIMATORS)]  # the registry's keys: a typo fails when the config loads


class AdvantageConfig(Strict):
    estimator: EstimatorName = Field(  # type: ignore[valid-type]
        "rae",
        description="rae: per-(game, role) EMA baseline (SPIRAL); reinforce: none; batch_mean; grpo; "
        "adpo and malt (task forge: over a task's attempts, and MALT's tree values)",
    )
    ema_decay: float = Field(0.95, ge=0, lt=1, description="RAE's α (SPIRAL: 0.95)")


class LoraSettings(Strict):
    r: int = Field(0, ge=0, description="LoRA rank; 0 = full fine-tuning")
    alpha: float = Field(16.0, gt=0, description="LoRA scaling α")
    target_modules: list[str] = Field(["q_proj", "k_proj", "v_proj", "o_proj"], description="modules given adapters")


class EvalConfig(Strict):
    every: int = Field(10, ge=0, description="evaluate every N iterations; 0 = never")
    on_start: bool = Field(
        False,
        description="evaluate the initial policies too, in the run's start event: where a curve begins (transformers' eval_on_start)",
    )
    matches: int = Field(32, ge=2, description="matches per opponent (half in each seat)")
    opponents: list[str] = Field(
        ["random", "initial"],
        description="scripted players by name, 'initial' (a frozen copy of the starting model) or 'past:K' (K iterations ago)",
    )


class ProbeConfig(Strict):
    enabled: bool = Field(
        False,
        description="the theory-of-mind probe (marl.probe): every iteration, how often each member predicts its "
        "opponent's next move, before it is made, logged as probe/<member>/accuracy beside probe/<member>/chance",
    )
    matches: int = Field(16, ge=1, description="the iteration's first N matches of games with a move list are probed")


class ScheduleConfig(Strict):
    mode: Literal["sync", "async"] = Field(
        "sync",
        description="sync: every iteration plays, then learns, then syncs weights; async: up to max_staleness iterations "
        "are played ahead, with the newest weights at hand, while the learners train (rollouts and learning overlap)",
    )
    max_staleness: int = Field(
        1, ge=0,
        description="async: a sample is played by weights at most this many learner updates behind the ones it trains "
        "(prime-rl's max_off_policy_steps); 0 plays as sync does",
    )  # fmt: skip


class LogConfig(Strict):
    report_to: list[Literal[TRACKERS]] = Field(
        [],
        description="experiment trackers that get every iteration's metrics beside events.jsonl: any of tensorboard, wandb "
        "(offline unless WANDB_MODE says otherwise), mlflow (a SQLite store in the run directory unless MLFLOW_TRACKING_URI "
        "names one); each an extra: pip install 'coevo[trackers]'",
    )
    transcripts: int = Field(2, ge=0, description="matches per iteration sent to the trackers as text")

    @field_validator("report_to")
    @classmethod
    def _installed(cls, value: list[str]) -> list[str]:
        missing = [name for name in dict.fromkeys(value) if importlib.util.find_spec(name) is None]
        if missing:
            raise ValueError(f"{missing[0]} is not installed: pip install 'coevo[{missing[0]}]' (or coevo[trackers] for all)")
        return list(dict.fromkeys(value))


def _documents_file_keys(schema: dict) -> None:
    """The schema of a config *file*: its values, and how files compose (``FILE_KEYS``)."""
    schema["properties"].update(FILE_KEYS)
    schema["description"] = (
        "A run config. Files compose: 'extends' names a config to start from, whose tables are merged key by key "
        "with this file's (this file's values win); 'replace' lists tables this file replaces whole. --set KEY=VALUE "
        "merges the same way; --set KEY:=VALUE replaces."
    )


class TrainConfig(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_documents_file_keys)

    seed: int = Field(0, description="root seed: matches, sampling and initialisation derive from it")
    iterations: int = Field(100, ge=1, description="training iterations (SPIRAL: 400)")
    model: str = Field("tiny", description="tiny | smollm2-135m | hf:<path>")
    model_seed: int = Field(0, description="initialisation seed of the tiny model")
    device: str = Field(
        "auto", description="where models compute: auto (a GPU if torch sees one; in a Ray actor, the one Ray gave it) | cpu | cuda | cuda:N"
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="model weights' precision: auto = bfloat16 on a GPU (float32 when every weight trains: lora.r = 0), "
        "float32 on the CPU; losses are fp32 either way",
    )
    mode: Literal["generate", "choose"] = Field("generate", description="generate: free text, parsed; choose: forced choice")
    games: dict[str, float] = Field({"kuhn_poker": 1.0}, description="game -> sampling weight")
    game_options: dict[str, dict[str, Any]] = Field(
        {}, description="game -> the options it is made with, its difficulty knobs (e.g. maze = { size = 7, density = 0.35 })"
    )
    checkpoint_every: int = Field(10, ge=1, description="checkpoint every N iterations (and at exit)")
    rollout: RolloutConfig = RolloutConfig()
    advantage: AdvantageConfig = AdvantageConfig()
    optim: OptimConfig = OptimConfig()
    lora: LoraSettings = LoraSettings()
    eval: EvalConfig = EvalConfig()
    pool: PoolConfig = PoolConfig()
    train: ScheduleConfig = Field(ScheduleConfig(), description="how rollouts and learning take turns: sync or async")
    log: LogConfig = Field(LogConfig(), description="where metrics go besides events.jsonl")
    probe: ProbeConfig = Field(ProbeConfig(), description="the theory-of-mind probe: predicting the opponent's next move")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS and not value.startswith("hf:"):
            raise ValueError(f"unknown model {value!r}; choose from {', '.join(MODELS)} or hf:<path>")
        if value.startswith("hf:"):
            check_hf_model(value.removeprefix("hf:"))
        return value

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        resolve_device(value)
        return value

    @field_validator("games")
    @classmethod
    def _known_games(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(name for name in value if not games.known(name) and name != "graph/custom")  # [graph]'s: RunConfig
        if unknown:
            raise ValueError(f"unknown games {unknown}; choose from {', '.join(games.list())} or openspiel/<game(params)>")
        if not value or any(w <= 0 for w in value.values()):
            raise ValueError("give at least one game, each with a positive weight")
        return value

    @model_validator(mode="after")
    def _game_options_make_their_games(self) -> TrainConfig:
        """Options are checked by making the game with them, so a wrong knob fails at load, not in a worker."""
        for game, options in self.game_options.items():
            if game not in self.games:
                raise ValueError(f"game_options: {game} is not one of the run's games ({', '.join(self.games)})")
            try:
                games.make(game, **options)
            except (TypeError, ValueError) as error:
                raise ValueError(f"game_options.{game}: {error}") from None
        return self

    @model_validator(mode="after")
    def _eval_opponents_exist(self) -> TrainConfig:
        scripted = {name for game in self.games for name in games.scripted_players(game)}
        unknown = [o for o in self.eval.opponents if o not in scripted and o != "initial" and not _is_past(o)]
        if unknown:
            raise ValueError(
                f"eval.opponents: no opponent {unknown[0]!r} for {', '.join(self.games)}; choose from "
                f"{', '.join(sorted(scripted))} (scripted players), initial (the starting model) or past:K (K >= 1 iterations ago)"
            )
        return self

    @model_validator(mode="after")
    def _checkpointing_needs_full_weights(self) -> TrainConfig:
        if self.optim.gradient_checkpointing and self.lora.r:
            raise ValueError("optim.gradient_checkpointing works with full fine-tuning only (lora.r = 0); turn one of them off")
        return self

    @model_validator(mode="after")
    def _outcome_estimators_need_their_games(self) -> TrainConfig:
        message = outcome_mismatch(self.advantage.estimator, self.games)
        if message:
            raise ValueError(f"advantage.estimator: {message}")
        return self

    @model_validator(mode="after")
    def _async_free_text_samples_at_temperature_1(self) -> TrainConfig:
        if self.train.mode == "async" and self.mode == "generate" and self.rollout.temperature != 1:
            raise ValueError(
                f"train.mode = 'async' corrects stale free-text samples with the log-probs they were drawn with, which the "
                f"learner compares at temperature 1; rollout.temperature is {self.rollout.temperature}: set it to 1 or use mode = 'choose'"
            )
        return self

    @model_validator(mode="after")
    def _choose_needs_move_lists(self) -> TrainConfig:
        if self.mode == "choose":
            envs = {g: games.make(g) for g in self.games if not g.startswith("graph/")}  # a graph's seats: RunConfig's check
            free = [g for g, env in envs.items() if not any(choosable(env, s) for s in env.possible_agents)]
            if free:
                raise ValueError(f"mode = 'choose' needs games with a move list; {free} take free text (use mode = 'generate')")
        return self

    @model_validator(mode="after")
    def _demonstrations_are_seat_turns_in_free_text(self) -> TrainConfig:
        if not self.rollout.demonstration:
            return self
        if self.mode != "generate" or self.rollout.compact_prompts:
            raise ValueError("rollout.demonstration shows a free-text turn: it needs mode = 'generate' without compact_prompts")
        for game in self.games:
            if game == "task_forge" or game.startswith(("graph/", "textarena/")):
                raise ValueError(f"rollout.demonstration: {game} has no seat turn to demonstrate (competitive games with move lists only)")
            try:
                demonstrations(game)
            except ValueError as error:
                raise ValueError(f"rollout.demonstration: {error}") from None
        return self


def outcome_mismatch(estimator: str | None, names: Sequence[str]) -> str | None:
    """Why ``estimator`` cannot credit the turns of ``names``, if it reads an outcome they lack
    (ADPO task forge's p̂, MALT task forge's attempt tree or a graph's turn values)."""
    fits = OUTCOME_ESTIMATORS.get(estimator)
    if fits is None or all(name.startswith(fits) for name in names):
        return None
    games_of = {"task_forge": "task forge's attempts", "graph/": "an orchestration graph's turns"}
    return (
        f"{estimator} credits {' or '.join(games_of[g] for g in fits)}; {', '.join(names)} has none "
        "(choose rae, reinforce, batch_mean or grpo)"
    )


def _is_past(opponent: str) -> bool:
    """``past:K``, K >= 1: the policy K iterations ago."""
    k = opponent.removeprefix("past:")
    return opponent.startswith("past:") and k.isdecimal() and int(k) >= 1


def _merge(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``, tables merged key by key."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A TOML file's tables, on top of the file its ``extends`` names (relative to it), if any."""
    if path.resolve() in seen:
        raise ConfigError(f"{path}: extends: the chain of extended configs comes back to this file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a directory, not a config file; give a .toml file, e.g. examples/kuhn_tiny.toml") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}); TOML files are UTF-8, so save it as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    base, replaced = data.pop("extends", None), data.pop("replace", [])
    if not isinstance(replaced, list) or not all(isinstance(key, str) and key for key in replaced):
        raise ConfigError(f"{path}: replace: give a list of table names, e.g. replace = [\"games\"]")
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{path}: extends: give the path of another config, as a string")
    inherited = _read(path.parent / base, (*seen, path.resolve()))
    for key in replaced:
        inherited = _without(inherited, key.split("."))
    return _merge(inherited, data)


def _without(data: dict, key: list[str]) -> dict:
    """``data`` less the value at the dotted ``key`` (a table this file replaces), if it is there."""
    head, *rest = key
    if head not in data:
        return data
    out = dict(data)
    if rest and isinstance(out[head], dict):
        out[head] = _without(out[head], rest)
    elif not rest:
        del out[head]
    return out


def _override(data: dict, item: str) -> dict:
    """``KEY=VALUE`` with a dotted key (``optim.lr=1e-3``); the value is read as TOML, else as a
    string. ``KEY:=VALUE`` replaces a table whole instead of merging into it."""
    key, sep, raw = item.partition("=")
    if key.endswith(":"):
        key = key[:-1]
        data = _without(data, key.strip().split("."))
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. optim.lr=1e-3 (or KEY:=VALUE to replace a table)")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    for part in reversed(key.strip().split(".")):
        value = {part: value}
    return _merge(data, value)


def to_toml(config: TrainConfig) -> str:
    """The config as a TOML file that loads back to it (a run directory's ``config.toml``)."""
    return tomli_w.dumps(config.model_dump(mode="json", exclude_none=True))


def load_config(path: str | Path, overrides: Sequence[str] = (), schema: type[TrainConfig] = TrainConfig) -> TrainConfig:
    """Read and validate a TOML config (and any it ``extends``), then ``overrides`` as KEY=VALUE;
    ``ConfigError`` (one line) on any problem. ``schema`` may extend ``TrainConfig`` (populations do)."""
    path = Path(path)
    data = _read(path)
    for item in overrides:
        data = _override(data, item)
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(f"{path}: {where}: {first['msg']}") from None
