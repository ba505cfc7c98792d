"""OpenSpiel games as text PettingZoo AEC envs.

``games.make("openspiel/leduc_poker")``, ``games.make("openspiel/goofspiel(num_cards=4,imp_info=True)")``:
the text after ``openspiel/`` goes to ``pyspiel.load_game``. Agents are ``player_0`` …; the
observation is ``{"prompt": text, "action_mask": int8[K]}`` with ``Discrete(K)`` actions, K the
game's ``num_distinct_actions``. ``open_spiel`` is an optional dependency:
``pip install 'coevo[openspiel]'``.

This wraps ``pyspiel`` directly rather than Shimmy's ``OpenSpielCompatibilityV0``: Shimmy observes
tensors wherever a game has them (an LLM needs OpenSpiel's strings), raises on an illegal action
instead of forfeiting, and pays only the last node's rewards after a run of chance nodes.

- **Simultaneous moves** (goofspiel, oshi_zumo) are played in turn through
  ``pyspiel.convert_to_turn_based``: each seat chooses without seeing the others' choices of the
  same round. Other non-sequential dynamics (mean-field games) are refused.
- **Chance** is resolved inside the env, sampled from ``chance_outcomes()`` with the env's own
  ``np_random`` (seeded by ``reset(seed=...)``); games that draw their randomness inside the game
  (``SAMPLED_STOCHASTIC``) are refused, since a seed could not fix their matches.
- **The prompt** is a rules paragraph, the seat's view of the state, and the legal moves. The view
  is the ``observation_string`` in perfect-information games (their ``information_state_string``
  is often a list of action ids, unreadable as a board) and the ``information_state_string``
  otherwise (what a player with perfect recall knows), so it is always a function of the seat's
  information state: ``games.openspiel_analysis`` prompts every information state this way.
  Two-player Kuhn and Leduc poker show theirs in words, cards last (``kuhn_view``, ``leduc_view``).
- **Moves** are OpenSpiel's ``action_to_string`` in the form our parser compares text in
  (:func:`games.core.bare`: case folded; brackets and colons made spaces, so ``x(0,2)`` is
  ``x 0,2`` and ``[P0]Bid: 1`` is ``p0 bid 1``). Names can depend on the seat and the state, so
  ``move_names`` always names the actions of the current state; two legal actions with the same
  name get ``#<action id>`` appended.
- **Rewards** are ``state.rewards()`` after the move and any chance nodes it leads to, so games
  with intermediate rewards pay as they go and a seat's rewards sum to ``state.returns()``. An
  illegal action ends the match: the offender earns ``illegal_reward`` and, in zero-sum games, the
  others share its opposite (:func:`games.core.forfeit`, as our own games do).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from games.core import LEGAL_MOVES, PROMPT_MAX_CHARS, FreeText, Parsed, TurnTakingEnv, bare, forfeit, match_move

if TYPE_CHECKING:
    import pyspiel

# Hand-written rules for a few common games, keyed by OpenSpiel's short name; they say how to read
# OpenSpiel's state strings, which are terse. Other games get the generic line only.
RULES: dict[str, str] = {
    "kuhn_poker": (
        "The deck is J, Q, K (with more players, ranks 0 to N). Each player antes 1 chip and gets one"
        " private card. Players take turns to pass or bet 1 chip; facing a bet, pass folds (the"
        " bettor takes the pot) and bet calls. Two passes or a call end the hand: the higher card"
        " takes the pot. With more than two players OpenSpiel's state is your card's rank, then the"
        " moves so far (p = pass, b = bet)."
    ),
    "leduc_poker": (
        "Six cards, two each of J, Q, K. Each player antes 1 chip and gets one private card; a"
        " betting round follows, then one public card is dealt and a second round. The same"
        " player acts first in both rounds. Moves: call (a check when nothing is owed), raise"
        " (2 chips in the first round, 4 in the second, at most two per round) and fold, which"
        " gives the pot away. At the showdown a card pairing the public card wins, else the"
        " higher card; equal ranks split the pot."
    ),
    "liars_dice": (
        "Each player rolls their dice in secret. Players take turns either to bid 'q-f', claiming"
        " that at least q of all the dice show face f, each bid above the last (more dice, or as"
        " many of a higher face), or to call 'liar' on the last bid. Then all dice are shown; the"
        " highest face is wild and counts as any face. If the bid holds the caller loses (-1, the"
        " bidder +1), else the bidder does. Your state is your own dice, then the bids so far."
    ),
    "goofspiel": (
        "Every player holds cards 1 to N; point cards 1 to N are turned up one per round. Each round"
        " every player bids a card from their hand; the highest bid wins the point card (a tie wins"
        " nothing) and bid cards are spent. The most points at the end wins."
    ),
    "tic_tac_toe": (
        "x moves first, then o; three of your marks in a row, column or diagonal wins (+1, the"
        " other -1), and a full board is a draw. A move names your mark and a cell as row,column"
        " counted from 0: 'x 0,2' is the top right."
    ),
    "phantom_ttt": (
        "Tic-tac-toe (x first; three in a row, column or diagonal wins) where you see only your own"
        " marks and the opponent's you have run into: trying a cell the opponent holds reveals it"
        " and you move again. Your state is the board as you know it, then your attempts as"
        " player,cell with cells 0-8 row by row. A move names your mark and a cell as row,column."
    ),
    "dark_hex": (
        "Hex where you see only your own stones and the opponent's you have run into: trying an"
        " occupied cell reveals it and you move again. x (the first player) wins by linking the top"
        " and bottom rows, o by linking the left and right columns. Your state is the board as you"
        " know it, the number of moves so far, then your attempts as player,cell."
    ),
    "first_sealed_auction": (
        "Each bidder privately draws a value from 1 to max_value, then bids in secret, less than"
        " their value. The highest bid wins (ties are broken at random) and earns its value minus"
        " its bid; the others earn 0."
    ),
}


def kuhn_view(info_state: str, player: int) -> str:
    """Two-player Kuhn's information state in words: OpenSpiel writes ``2pb`` (the card's rank, then
    p and b for pass and bet), card first. Here the moves read as "you" and "opponent" (player 0
    opens) and the card comes last, as in our ``kuhn_poker``'s compact prompt. (The tiny model still
    learns OpenSpiel's Kuhn far less well than ours: 0.29-0.32 after 30 iterations of
    ``examples/kuhn_tiny.toml``'s recipe against 0.12; the card's place is not the difference.)"""
    who = ["you", "opponent"] if player == 0 else ["opponent", "you"]
    said = [f"{who[i % 2]} {KUHN_MOVES[m]}" for i, m in enumerate(info_state[1:])]
    return f"Moves so far: {', '.join(said) or 'none yet'}.\nYour card: {KUHN_RANKS[int(info_state[0])]}"


def leduc_view(info_state: str, player: int, first: int) -> str:
    """Leduc's information state in words, for the default two-player deck.

    OpenSpiel writes it as ``[Private: 3]…[Public: 0][Round1: 1 2 1][Round2: ]``: card and action
    ids a reader must decode. Here the betting reads as moves by "you" and "opponent", and the
    cards come last, own card at the very end, where a small model trained from scratch must
    decide on them (the lesson of Kuhn poker's compact prompts). Suits are dropped: they never
    matter in Leduc, so the policy is a function of the suit-isomorphic information state.
    """
    field = dict(re.findall(r"\[(\w+): ?([^\]]*)\]", info_state))
    who = ["you", "opponent"] if first == player else ["opponent", "you"]
    lines = []
    for r in (1, 2):
        said = [f"{who[i % 2]} {LEDUC_MOVES[int(a)]}" for i, a in enumerate(field[f"Round{r}"].split())]
        lines.append(f"Round {r} betting: {', '.join(said) or 'none yet'}.")
    public = field.get("Public")
    lines.append(f"Public card: {LEDUC_RANKS[int(public) // 2] if public else 'not dealt yet'}.")
    lines.append(f"Your card: {LEDUC_RANKS[int(field['Private']) // 2]}")
    return "\n".join(lines)


KUHN_MOVES = {"p": "pass", "b": "bet"}
KUHN_RANKS = "JQK"  # the two-player deck's card ids
LEDUC_MOVES = ("fold", "call", "raise")  # OpenSpiel's action ids
LEDUC_RANKS = "JQK"  # card id // 2 in the two-player deck


def _words_view(short_name: str, params: dict) -> Callable[[str, int], str] | None:
    """The information state in words, for the games that have it (two-player Kuhn and Leduc)."""
    if short_name == "kuhn_poker" and params["players"] == 2:
        return kuhn_view
    two_player_deck = [params.get(k) for k in ("players", "suit_isomorphism", "action_mapping")] == [2, False, False]
    if short_name == "leduc_poker" and two_player_deck:
        return functools.partial(leduc_view, first=params["starting_player"])
    return None


SIMULTANEOUS_NOTE = (
    "OpenSpiel plays this game with simultaneous moves; here players choose in turn, and nobody"
    " sees another's choice of the same round before making their own."
)


def _pyspiel():
    try:
        import pyspiel
    except ImportError as err:
        raise ImportError("OpenSpiel games need open_spiel: pip install 'coevo[openspiel]'") from err
    return pyspiel


def load_game(spec: str) -> pyspiel.Game:
    """The OpenSpiel game ``spec`` names (``"goofspiel(num_cards=4)"``), turn-based.

    Raises ValueError, in one line, for a name or parameters pyspiel refuses and for a game that
    cannot be played as a seeded turn-based text game.
    """
    pyspiel = _pyspiel()
    try:
        game = pyspiel.load_game(spec)
    except pyspiel.SpielError as err:
        said = str(err).splitlines()[0].removesuffix(" Available games are:")
        raise ValueError(f"openspiel/{spec}: {said} (pyspiel.registered_names() lists the games)") from None
    kind = game.get_type()
    if kind.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
        game = pyspiel.convert_to_turn_based(game)
        kind = game.get_type()
    if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise ValueError(f"openspiel/{spec}: {kind.dynamics.name.lower()} games cannot be played turn by turn")
    if kind.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC:
        raise ValueError(f"openspiel/{spec}: the game samples its own chance events, which a seed cannot fix")
    if not (kind.provides_information_state_string or kind.provides_observation_string):
        raise ValueError(f"openspiel/{spec}: the game describes no state as text")
    return game


def _legal(state: pyspiel.State) -> list[int]:
    """The legal actions of the seat to move; none at chance nodes and finished states."""
    return state.legal_actions() if state.current_player() >= 0 else []


def _move_name(state: pyspiel.State, player: int, action: int) -> str:
    """OpenSpiel's name for an action, as a fixed point of :func:`bare` (what parsing compares)."""
    try:
        raw = state.action_to_string(player, action)
    except _pyspiel().SpielError:  # a few games cannot name an action that is not legal here
        raw = ""
    return bare(re.sub(r"[()\[\]{}<>:;\"]", " ", raw)) or f"action {action}"


class _MoveNames(Sequence[str]):
    """``env.move_names``: action i's name in the env's current state (names change with the seat to
    move and the state, as tic-tac-toe's ``x 0,0``/``o 0,0`` do)."""

    def __init__(self, env: OpenSpielEnv):
        self._env = env

    def __len__(self) -> int:
        return self._env.game.num_distinct_actions()

    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self._env._names[i]


class OpenSpielEnv(TurnTakingEnv):
    """An OpenSpiel game behind the PettingZoo AEC API, with text prompts and named moves.

    Args:
        spec: an OpenSpiel game string such as ``"liars_dice(numdice=1)"``.
        max_turns: turn cap (default: the game's ``max_game_length``); reaching it truncates the
            match with no further reward.
        illegal_reward: what a seat earns for a masked-out action; the match ends (see the module
            docstring).
        render_mode: ``"ansi"`` (``render()`` returns ``str(state)``, hidden information included),
            ``"human"`` (prints it, also after every reset and move) or None.
    """

    def __init__(
        self, spec: str, *, max_turns: int | None = None, illegal_reward: float = -1.0, render_mode: str | None = None
    ):
        super().__init__(render_mode)
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        pyspiel = _pyspiel()
        self.spec = spec
        self.game = load_game(spec)
        base = pyspiel.load_game(spec)  # before any turn-based conversion: its own name and type
        kind = base.get_type()
        self.max_turns = max_turns or self.game.max_game_length()
        self.illegal_reward = illegal_reward
        self.zero_sum = kind.utility == pyspiel.GameType.Utility.ZERO_SUM
        self._view_is_observation = kind.information == pyspiel.GameType.Information.PERFECT_INFORMATION or (
            not kind.provides_information_state_string
        )
        params = base.get_parameters()
        self._view = _words_view(kind.short_name, params)
        rules = [f"You are playing {kind.long_name} (OpenSpiel {base}) with {self.game.num_players()} players."]
        rules += [RULES[kind.short_name]] if kind.short_name in RULES else []
        rules += [SIMULTANEOUS_NOTE] if kind.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS else []
        self.rules_text = " ".join(rules)
        self.metadata = {**TurnTakingEnv.metadata, "name": f"openspiel_{kind.short_name}"}
        self.possible_agents = [f"player_{i}" for i in range(self.game.num_players())]
        k = self.game.num_distinct_actions()
        self._obs_space = gymnasium.spaces.Dict(
            {"prompt": FreeText(PROMPT_MAX_CHARS), "action_mask": gymnasium.spaces.Box(0, 1, (k,), np.int8)}
        )
        self._act_space = gymnasium.spaces.Discrete(k)
        self.move_names = _MoveNames(self)
        self.state = self.game.new_initial_state()  # replaced at reset; here so that names exist
        self._set_names()

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._obs_space

    def action_space(self, agent: str) -> gymnasium.Space:
        return self._act_space

    # ---- what a seat sees, for any state (the env's own, or one an analysis enumerates) ----

    def move_names_of(self, state: pyspiel.State) -> list[str]:
        """The name of every action (index = action id) for the seat to move at ``state``, seat 0
        where none is; the legal ones are distinct."""
        player = max(state.current_player(), 0)
        names = [_move_name(state, player, a) for a in range(self.game.num_distinct_actions())]
        legal = _legal(state)
        shared = Counter(names[a] for a in legal)
        for a in legal:
            if shared[names[a]] > 1:
                names[a] = f"{names[a]} #{a}"
        return names

    def prompt_of(self, state: pyspiel.State, player: int) -> str:
        """What ``player`` is shown at ``state``, its legal moves listed when it is to move."""
        names = self.move_names_of(state)
        legal = [names[a] for a in state.legal_actions(player)] if state.current_player() == player else []
        return self._prompt(state, player, legal, over=state.is_terminal())

    def _prompt(self, state: pyspiel.State, player: int, legal: list[str], over: bool) -> str:
        if legal:
            status = f"{LEGAL_MOVES} " + ", ".join(legal)
        elif over:
            status = "The match is over."
        else:
            status = f"Waiting for player_{state.current_player()} to move."
        head = f"{self.rules_text}\n\nYou are player_{player}. Your view of the game"
        if self._view is not None:
            view, head = self._view(state.information_state_string(player), player), f"{head}:\n"
        elif self._view_is_observation:
            view, head = state.observation_string(player), f"{head}, as OpenSpiel writes it:\n"
        else:
            view, head = state.information_state_string(player), f"{head}, as OpenSpiel writes it:\n"
        room = PROMPT_MAX_CHARS - len(head) - len(status) - 1
        return f"{head}{view.rstrip()[-room:]}\n{status}"  # a view too long for the window keeps its end

    # ---- the AEC env ----

    def _seat_to_move(self) -> int | None:
        player = self.state.current_player()
        return None if self._is_over() or player < 0 else player

    def _set_names(self) -> None:
        self._names = self.move_names_of(self.state)
        legal = _legal(self.state)
        self._action_of = {name: a for a, name in enumerate(self._names)}
        # Legal actions last, so that an illegal action sharing a legal one's name never shadows it.
        self._action_of |= {self._names[a]: a for a in legal}

    def _resolve_chance(self) -> np.ndarray:
        """Sample chance nodes until a seat is to move; what each seat earned on the way."""
        earned = np.zeros(self.game.num_players())
        while self.state.is_chance_node():
            outcomes, probs = zip(*self.state.chance_outcomes())
            p = np.asarray(probs, dtype=float)
            self.state.apply_action(outcomes[self.np_random.choice(len(outcomes), p=p / p.sum())])
            earned += self.state.rewards()
        return earned

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._seed(seed)
        self.state = self.game.new_initial_state()
        self._resolve_chance()  # the deal: nothing is earned before the first move
        self._set_names()
        self._start(self.possible_agents[self.state.current_player()])

    def legal_moves(self, agent: str) -> list[str]:
        """Named moves open to ``agent`` now, in OpenSpiel's legal-action order: empty unless it is
        that seat's turn."""
        if self._seat_to_move() != self.possible_agents.index(agent):
            return []
        return [self._names[a] for a in self.state.legal_actions()]

    def parse_move(self, agent: str, text: str, lenient: bool = False) -> Parsed:
        """Read ``agent``'s move from text that is one (``lenient``: or names exactly one)."""
        legal = self.legal_moves(agent)
        if not legal:
            return Parsed(None, f"it is not {agent}'s turn")
        return match_move(text, legal, tuple(self._names), lenient)

    def random_move(self, agent: str, rng: np.random.Generator) -> str | None:
        """A uniformly random legal move for ``agent`` (None when it is not its turn)."""
        legal = self.legal_moves(agent)
        return legal[rng.integers(len(legal))] if legal else None

    def action_of(self, move: str) -> int:
        return self._action_of[move]

    def observe(self, agent: str) -> dict[str, Any]:
        seat = self.possible_agents.index(agent)
        mask = np.zeros(self.game.num_distinct_actions(), np.int8)
        if self._seat_to_move() == seat:
            mask[self.state.legal_actions()] = 1
        prompt = self._prompt(self.state, seat, self.legal_moves(agent), over=self._is_over())
        return {"prompt": prompt, "action_mask": mask}

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        seat = self.possible_agents.index(agent)
        reason = self._refusal(action)
        if reason:
            earned = np.array(forfeit(len(self.possible_agents), seat, self.illegal_reward, self.zero_sum))
            info = {"move": None, "valid": False, "reason": reason}
        else:
            info = {"move": self._names[int(action)], "valid": True, "reason": ""}
            self.state.apply_action(int(action))
            earned = np.asarray(self.state.rewards()) + self._resolve_chance()
            self._set_names()
        over = bool(reason) or self.state.is_terminal()
        rewards = {a: float(earned[i]) for i, a in enumerate(self.possible_agents)}
        next_agent = None if over else self.possible_agents[self.state.current_player()]
        self._end_turn(agent, rewards, info, over, next_agent)

    def _refusal(self, action: Any) -> str:
        """Why ``action`` cannot be played now; "" when it can."""
        k = self.game.num_distinct_actions()
        if not isinstance(action, (int, np.integer)) or not 0 <= action < k:
            return f"action {action!r} is not a move index in [0, {k})"
        legal = self.state.legal_actions()
        if int(action) not in legal:
            names = ", ".join(self._names[a] for a in legal)
            return f"'{self._names[int(action)]}' is not legal now; legal moves: {names}"
        return ""

    def _render_text(self) -> str:
        return str(self.state)
