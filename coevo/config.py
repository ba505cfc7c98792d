"""A run's config: ``[population]``, ``[roles]`` (task forge's or an orchestration graph's, each
role optionally a population), ``[graph]``, ``[forge]`` and ``[rewards]`` on top of the training
config; every kind of run is trained by ``coevo.train.Trainer``.

Without ``[population]`` or ``[roles]`` a run is plain self-play of one policy; with
``[population]`` a population of members is trained, matched, rated and evolved; with ``[roles]``
task forge's roles, or a graph's nodes, co-evolve, each role its own members and estimator.
``graph = "malt"`` (a built-in) or a ``[graph]`` table of nodes and edges (``roles.graph``) makes
the run play that graph: its game is ``graph/<name>`` (``graph/custom`` for a table).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

import games
from games.core import choosable
from games.task_forge.players import FORGE_PLAYERS
from games.task_forge.sandbox import Limits
from marl.config import EstimatorName, LoraSettings, Strict, TrainConfig, load_config, outcome_mismatch
from marl.players import MODELS, check_hf_model
from populations.config import OracleConfig, PopulationConfig, RolePopulationConfig
from roles.graph import BUILTIN, GraphSpec, builtin
from roles.graph_game import CUSTOM
from roles.rewards import RewardConfig

SAMPLING_HPARAMS = ("temperature", "top_p")  # a member's own sampling settings, which PBT may tune

FORGE_ROLES = ("proposer", "executor", "verifier", "teacher")


class RoleConfig(Strict):
    """Who plays one task forge role, and how it learns."""

    player: str = Field(description="scripted:<name> (games.task_forge.players) | tiny | smollm2-135m | hf:<path>")
    members: int = Field(1, ge=1, description="the role's population: members take turns in its seat, each learning from its own turns")
    trainable: bool = Field(True, description="models: gradient updates; scripted players: their own learn() (curricula, skill)")
    estimator: EstimatorName | None = Field(  # type: ignore[valid-type]
        None,
        description="rae (per-(game, role) EMA), reinforce, batch_mean, grpo (over a task's attempts), adpo, malt; "
        "unset: the run's [advantage] estimator",
    )
    task_filter: bool = Field(False, description="executor: learn only from tasks with 0.3 <= p̂ <= 0.8 (Agent0)")
    kickstart: float = Field(0.0, ge=0, description="executor: λ of λ·KL(teacher ‖ executor) on its own turns; the teacher must be a model")
    kickstart_final: float | None = Field(None, ge=0, description="anneal λ linearly to this by the last iteration")
    model_seed: int = Field(0, description="initialisation seed of a tiny model")
    lora: LoraSettings = LoraSettings()
    population: RolePopulationConfig | None = Field(
        None, description="the role as a population: snapshots, and how its seat is filled for other roles' learners"
    )

    @property
    def scripted(self) -> str | None:
        """The scripted player's name, or None for a model."""
        return self.player.removeprefix("scripted:") if self.player.startswith("scripted:") else None


class ForgeConfig(Strict):
    attempts: int = Field(4, ge=1, description="k: the executor's independent attempts per task (p̂ is over them)")
    tool_calls: int = Field(2, ge=0, description="T: Python runs the executor may make per attempt")
    proposer_tool_calls: int = Field(4, ge=0, description="Python runs the proposer may make before submitting")
    cpu_seconds: float = Field(2.0, gt=0, description="sandbox CPU limit per program")
    wall_seconds: float = Field(5.0, gt=0, description="sandbox wall-time limit per program")
    heldout: int = Field(
        32, ge=1, description="held-out tasks per family for the evaluation of task forge's executors, or of a graph's answer"
    )
    heldout_difficulty: float | None = Field(
        None, ge=0, le=1,
        description="the held-out tasks all at this difficulty (both knobs), where a curriculum keeps a weak learner; "
        "unset: spread evenly over every difficulty",
    )  # fmt: skip
    seed_tasks: bool = Field(
        False, description="play a task-family task when the proposer's is invalid, so the other roles still learn"
    )
    choices: int = Field(
        0,
        ge=0,
        description="multiple choice: the executor picks its answer among this many options (the reference and answers "
        "of other tasks of its family), so forced choice (mode = 'choose') can play it; needs tool_calls = 0 and a "
        "scripted proposer; in a graph, its answering nodes pick among options and run no Python; 0 = free answers",
    )
    sandbox: Literal["bwrap", "rlimit"] = Field(
        "bwrap",
        description="where model-written code runs: bwrap (bubblewrap, the security boundary; `make system-deps` "
        "installs it); rlimit opts into the fallback for machines without it, which is NOT a boundary (docs/reliability.md)",
    )

    def limits(self) -> Limits:
        """What one player's program may use."""
        return Limits(cpu_seconds=self.cpu_seconds, wall_seconds=self.wall_seconds)


class RunConfig(TrainConfig):
    population: PopulationConfig | None = None
    roles: dict[str, RoleConfig] | None = Field(
        None, description="co-evolving roles, each its own members: task forge's, or the nodes of the run's graph"
    )
    graph: str | GraphSpec | None = Field(
        None,
        description="an orchestration graph to play (roles.graph): a built-in's name (solo, malt, agentflow, debate, agent0, task_forge) or "
        "a table of nodes and edges; the run's game is then graph/<name> (graph/custom for a table), so leave games out",
    )
    forge: ForgeConfig = ForgeConfig()
    rewards: dict[str, float | bool | str] = Field({}, description="roles.rewards.RewardConfig's fields, e.g. uncertainty = 'min'")

    @model_validator(mode="before")
    @classmethod
    def _graph_is_the_game(cls, data):
        """``graph`` names the run's one game; a ``games`` that says otherwise is refused."""
        graph = data.get("graph") if isinstance(data, dict) else None
        if graph is None or isinstance(graph, str) and graph not in BUILTIN:
            return data  # an unknown built-in: the field's own error names the built-ins
        game = f"graph/{graph if isinstance(graph, str) else CUSTOM}"
        if "games" in data and set(data["games"]) != {game}:
            raise ValueError(f"graph: the run plays {game}; leave games out (it says {', '.join(data['games'])})")
        return {**data, "games": {game: 1.0}}

    @field_validator("graph")
    @classmethod
    def _known_graph(cls, value: str | GraphSpec | None) -> str | GraphSpec | None:
        if isinstance(value, str):
            builtin(value)
        return value

    @property
    def graph_spec(self) -> GraphSpec | None:
        """The graph the run plays, built-in or its own; None for other games."""
        (game,) = self.games if len(self.games) == 1 else (None,)
        if isinstance(self.graph, GraphSpec):
            return self.graph
        return builtin(game.removeprefix("graph/")) if game and game.startswith("graph/") else None

    def game_kwargs(self, game: str) -> dict:
        """What a worker needs to make ``game`` beyond its name: its ``game_options``, a custom graph's spec, and where a
        graph runs players' code (Python, a written task's program), what ``[forge]`` sets for it."""
        kwargs = {"spec": self.graph.model_dump()} if game == f"graph/{CUSTOM}" else {}
        kwargs |= self.game_options.get(game, {})
        spec = self.graph_spec if game.startswith("graph/") else None
        if spec is not None and spec.runs_code():
            kwargs |= {"sandbox": self.forge.sandbox, "limits": self.forge.limits()}
        if spec is not None and spec.writer():
            kwargs["seed_tasks"] = self.forge.seed_tasks
        if spec is not None and self.forge.choices:
            kwargs["choices"] = self.forge.choices
        return kwargs

    @model_validator(mode="after")
    def _custom_graph_has_its_spec(self) -> RunConfig:
        if f"graph/{CUSTOM}" in self.games and not isinstance(self.graph, GraphSpec):
            raise ValueError(f"games: graph/{CUSTOM} is the run's own graph: give it as a [graph] table of nodes and edges")
        if any(g.startswith("graph/") for g in self.games) and len(self.games) > 1:
            raise ValueError("games: a run plays one graph, alone (its metrics are the graph's); compare graphs with a sweep")
        if any(g.startswith("graph/") for g in self.games) and self.population is not None:
            raise ValueError(
                "population: a graph's seats share one outcome, so there is no opponent to match; "
                "give its nodes populations under [roles.<node>.population]"
            )
        return self

    @model_validator(mode="after")
    def _roles_fit_the_run(self) -> RunConfig:
        if self.roles is None:
            return self
        if self.population is not None:
            raise ValueError("population: with [roles], a role's population is its own table: [roles.<role>.population]")
        spec = self.graph_spec
        if spec is not None:
            self._roles_are_nodes(spec)
        else:
            self._roles_are_forge_roles()
        for role, seat in self.roles.items():
            if seat.scripted is None:
                if seat.player not in MODELS and not seat.player.startswith("hf:"):
                    raise ValueError(f"roles.{role}.player: unknown player {seat.player!r}; scripted:<name>, {', '.join(MODELS)} or hf:<path>")
                if seat.player.startswith("hf:"):
                    try:
                        check_hf_model(seat.player.removeprefix("hf:"))
                    except ValueError as err:
                        raise ValueError(f"roles.{role}.player: {err}") from None
            message = outcome_mismatch(seat.estimator, list(self.games))
            if message:
                raise ValueError(f"roles.{role}.estimator: {message}")
        try:
            RewardConfig(**self.rewards)
        except TypeError as err:
            raise ValueError(f"rewards: {err}") from None
        return self

    @model_validator(mode="after")
    def _graph_options_have_families(self) -> RunConfig:
        """Under multiple choice a graph's written task must name its family, which only a
        scripted writer's does (as in task forge)."""
        spec = self.graph_spec  # one graph, its spec given: the checks above
        writer = spec and spec.writer()
        if not (writer and self.forge.choices) or self.forge.seed_tasks:
            return self
        if self._model_plays(writer):
            raise ValueError(
                f"forge.choices: the options come from the task's family, which only a scripted writer's tasks name; "
                f"seat one at [roles.{writer}], or set [forge] seed_tasks = true"
            )
        return self

    @model_validator(mode="after")
    def _graph_seats_choosable(self) -> RunConfig:
        """Forced choice plays a graph's model seats only where every node they play offers
        options: a verdict, or an answer under ``[forge] choices``."""
        game = next(iter(self.games))
        if self.mode != "choose" or not game.startswith("graph/") or len(self.games) > 1:
            return self
        env = games.make(game, **{**self.game_kwargs(game), "sandbox": "rlimit"})  # nothing runs: the rules are asked
        env.reset(seed=0)
        for seat in env.possible_agents:
            if self._model_plays(env.unwrapped.rules.node_of[seat]) and not choosable(env, seat):
                raise ValueError(
                    f"mode: forced choice cannot play the {seat} of {game} (a node it plays writes free text, or answers "
                    "without options); set [forge] choices for answering nodes, seat a scripted player there, or use mode = 'generate'"
                )
        return self

    def _model_plays(self, node: str) -> bool:
        """Whether a model plays a graph node's seat: without [roles], one policy plays every seat."""
        return self.roles is None or self.roles[node].scripted is None

    def _roles_are_nodes(self, spec: GraphSpec) -> None:
        """A graph's roles: one per node with a seat of its own (a node another's seat plays is that
        role's too), each played by models that learn from their own turns or a scripted player."""
        seated = [n for n, node in spec.nodes.items() if not node.seat]
        missing, unknown = [n for n in seated if n not in self.roles], sorted(set(self.roles) - set(seated))
        if missing or unknown:
            raise ValueError(f"roles: one per node of the graph with a seat ({', '.join(seated)}); missing {missing}, unknown {unknown}")
        scripted = games.scripted_players(next(iter(self.games)))
        for role, seat in self.roles.items():
            if seat.scripted is not None and seat.scripted not in scripted:
                raise ValueError(
                    f"roles.{role}.player: no scripted player {seat.scripted!r} for a graph's nodes; choose from {', '.join(scripted)}"
                )
            if seat.task_filter or seat.kickstart or seat.kickstart_final is not None:
                raise ValueError(f"roles.{role}: task_filter and kickstart are task forge's executor's")

    def _roles_are_forge_roles(self) -> None:
        if set(self.games) != {"task_forge"}:
            raise ValueError("roles: co-evolution plays task_forge or a graph; set games = { task_forge = 1.0 } or graph = ...")
        missing = [r for r in FORGE_ROLES[:3] if r not in self.roles]
        unknown = sorted(set(self.roles) - set(FORGE_ROLES))
        if missing or unknown:
            raise ValueError(f"roles: need {', '.join(FORGE_ROLES[:3])} (and optionally teacher); missing {missing}, unknown {unknown}")
        for role, seat in self.roles.items():
            name = seat.scripted
            if name is not None and (name not in FORGE_PLAYERS or FORGE_PLAYERS[name]().seat != role):
                fits = [n for n, make in FORGE_PLAYERS.items() if make().seat == role]
                raise ValueError(f"roles.{role}.player: no scripted {role} {name!r}; choose from {', '.join(fits)}")
            if seat.estimator == "adpo" and role != "executor":
                raise ValueError(f"roles.{role}.estimator: adpo is the executor's (it scales by the task's p̂)")
            if (seat.kickstart or seat.kickstart_final) and (role != "executor" or "teacher" not in self.roles or self.roles["teacher"].scripted):
                raise ValueError(f"roles.{role}.kickstart: kickstarting distils a teacher model into the executor; seat a model teacher")
        self._choices_fit()

    def _choices_fit(self) -> None:
        """Multiple choice and forced choice: the game's own checks of its options and of which seats
        forced choice can play, asked of the rules (nothing runs, so no sandbox is needed), and
        where the options come from."""
        forge = self.forge
        try:
            env = games.make(
                "task_forge", tool_calls=forge.tool_calls, choices=forge.choices, teacher="teacher" in self.roles, sandbox="rlimit"
            )
        except ValueError as err:
            raise ValueError(f"forge.choices: {err}") from None
        if forge.choices and self.roles["proposer"].scripted is None and not forge.seed_tasks:
            raise ValueError(
                "forge.choices: the options come from the task's family, which only a scripted proposer's tasks name; "
                "seat one, or set [forge] seed_tasks = true"
            )
        if self.mode != "choose":
            return
        hints = {"executor": "set [forge] choices to offer it options"}
        for role, seat in self.roles.items():
            if seat.scripted is None and not choosable(env, role):
                hint = hints.get(role, f"the {role} writes free text")
                raise ValueError(f"roles.{role}: mode = 'choose' cannot play this model ({hint}); seat a scripted player or use mode = 'generate'")

    @property
    def reward_config(self) -> RewardConfig:
        return RewardConfig(**self.rewards)

    @model_validator(mode="after")
    def _population_fits_the_run(self) -> RunConfig:
        if self.population is None:
            return self
        if self.population.size == 0 and self.population.matchmaker != "league":
            raise ValueError("population.size: training needs at least one trainable member")
        if self.population.oracle != OracleConfig() and self.population.matchmaker != "psro":
            raise ValueError("population.oracle: best-response oracles are PSRO's; set population.matchmaker = 'psro'")
        population = self.population
        if population.matchmaker == "psro" and population.meta_solver != "uniform" and not (population.eval_matches or population.meet_matches):
            raise ValueError("population.eval_matches: PSRO solves its meta-game from matches between snapshots, which only "
                             "evaluation and meet_matches play; set either above 0 (the example plays 16)")  # fmt: skip
        if population.meet_matches and population.matchmaker != "psro":
            raise ValueError("population.meet_matches: meetings fill PSRO's meta-game; set population.matchmaker = 'psro'")
        if population.meet_matches and self.train.mode != "sync":
            raise ValueError("population.meet_matches: a snapshot meets the others between iterations, which async "
                             "training overlaps; set train.mode = 'sync' or use eval_matches")  # fmt: skip
        ranges = self.population.pbt.ranges
        unknown = sorted(set(ranges) - set(type(self.optim).model_fields) - set(SAMPLING_HPARAMS))
        if unknown:
            raise ValueError(f"population.pbt.ranges: {unknown} are neither optim settings nor {' or '.join(SAMPLING_HPARAMS)}")
        if "top_p" in ranges and ranges["top_p"][1] > 1:
            raise ValueError("population.pbt.ranges: top_p is a probability; its range must end at 1 or below")
        if self.population.opponents:
            if len(self.games) != 1:
                raise ValueError("population.opponents: scripted members need a run of one game")
            game = next(iter(self.games))
            scripted = games.scripted_players(game)
            missing = sorted(set(self.population.opponents) - set(scripted))
            if missing:
                raise ValueError(f"population.opponents: {game} has no scripted player {missing[0]!r}; choose from {', '.join(scripted)}")
        return self


def load_run_config(path: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    return load_config(path, overrides, schema=RunConfig)
