"""Seat roles: answer extraction, parsing that never guesses and never raises, invalid-move configuration."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import games
from games.core import bare
from games.negotiation import read_move
from games.formats import extract_answer
from roles.seat import InvalidMoves, SeatRole, demonstrations, family_of


@pytest.mark.parametrize(
    "text, answer",
    [
        ("I think... \\boxed{bet}", "bet"),
        ("\\boxed{check} no wait \\boxed{ bet }", "bet"),  # the last box wins
        ("\\boxed{\\text{call}}", "call"),
        ("\\boxed{offer {3} wood}", "offer {3} wood"),  # balanced braces
        ("[Offer: 3 Wood -> 2 Gold]", "Offer: 3 Wood -> 2 Gold"),
        ("first [a1] then [b2]", "b2"),
        ("\\boxed{unclosed", None),
        ("no answer at all", None),
        ("", None),
    ],
)
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize(
    "text, move",
    [
        ("Reasoning.\n\\boxed{BET}", "bet"),
        ("I'll go with [ check ].", "check"),
        ("\\boxed{\\text{Bet}}", "bet"),
        ("bet", "bet"),  # no box: the whole text is read, if it is a move
        ("  Bet!\n", "bet"),
        ("\\boxed{**check**.}", "check"),
    ],
)
def test_parse_is_lenient_inside_the_format(text, move):
    env = games.make("kuhn_poker")
    env.reset(seed=0)
    assert SeatRole("kuhn_poker").parse(env, "player_0", text).move == move


@pytest.mark.parametrize(
    "text, reason",
    [
        ("I will check, not bet", "no \\boxed{} answer"),
        # SmolLM2 in `coevo match kuhn_poker --p0 smollm2-135m --p1 nash --seed 3` (it was played as bet):
        ("Your next action will be to check. The other player calls, they win the bet you considered", "no \\boxed{} answer"),
        ("\\boxed{I bet}", "not a move; got 'I bet'"),
        ("\\boxed{fold}", "'fold' is not legal now"),
        ("fold", "'fold' is not legal now"),
    ],
)
def test_parse_never_guesses_a_move_the_text_only_mentions(text, reason):
    env = games.make("kuhn_poker")
    env.reset(seed=3)
    parsed = SeatRole("kuhn_poker").parse(env, "player_0", text)
    assert not parsed.valid and parsed.reason.startswith(reason)


def test_lenient_parsing_reads_one_named_move_and_refuses_two():
    env = games.make("kuhn_poker")
    env.reset(seed=3)
    role = SeatRole("kuhn_poker")
    assert role.parse(env, "player_0", "With a king I will... BET!", lenient=True).move == "bet"
    assert role.parse(env, "player_0", "\\boxed{I bet}", lenient=True).move == "bet"
    two = role.parse(env, "player_0", "I will check, not bet", lenient=True)
    assert not two.valid and "names more than one move (bet, check)" in two.reason


FINITE = [g for g in games.list() if games.make(g).move_names is not None]
# Text that mentions moves freely, but never holds an answer format (no box, no brackets).
mentions = st.lists(
    st.one_of(st.sampled_from(["check", "bet", "call", "fold", "raise", "a1", "b2", "column 3", "rock", "not", "I"]), st.text()),
    max_size=8,
).map(" ".join).filter(lambda t: "\\boxed" not in t and "[" not in t)


@pytest.mark.parametrize("game", [*FINITE, "simple_negotiation"])
@given(text=mentions)
def test_text_without_the_answer_format_is_a_move_only_when_it_is_one(game, text):
    env = games.make(game)
    env.reset(seed=0)
    agent = env.agent_selection
    parsed = SeatRole(game).parse(env, agent, text)
    if game == "simple_negotiation":
        is_a_move = read_move(text) is not None
    else:
        is_a_move = bare(text) in env.move_names
    assert parsed.valid <= is_a_move, f"{text!r} was read as {parsed.move!r}"
    if not is_a_move:
        assert parsed.reason.startswith("no \\boxed{} answer")


def test_textarena_answers_are_bracketed_for_the_env():
    env = games.make("textarena/KuhnPoker-v0")
    env.reset(seed=0)
    role = SeatRole("textarena/KuhnPoker-v0")
    assert role.parse(env, env.agent_selection, "\\boxed{bet}").move == "[bet]"
    assert role.parse(env, env.agent_selection, "\\boxed{[check]}").move == "[check]"
    assert not role.parse(env, env.agent_selection, "nothing").valid


@pytest.mark.parametrize("game", [g for g in games.list()])
@given(text=st.text())
def test_parse_never_raises_on_any_text(game, text):
    env = games.make(game)
    env.reset(seed=0)
    parsed = SeatRole(game).parse(env, env.agent_selection, text)
    assert parsed.valid or parsed.reason
    if parsed.valid and env.move_names is not None:
        assert parsed.move in env.legal_moves(env.agent_selection)


def test_every_game_has_a_family_prompt():
    for game in games.list():
        system, user = SeatRole(game).messages("state")
        assert "\\boxed" in system["content"] and user == {"role": "user", "content": "state"}
    assert family_of("kuhn_poker") == "poker" and family_of("textarena/TicTacToe-v0") == "arena"


def test_compact_prompt_is_the_state_as_plain_text_ending_on_the_card():
    env = games.make("kuhn_poker")
    env.reset(seed=3)
    agent = env.agent_selection
    role = SeatRole("kuhn_poker", compact=True)
    prompt = role.messages(env.observe(agent)["prompt"])
    card = env.unwrapped.rules.cards[env.possible_agents.index(agent)]
    assert isinstance(prompt, str) and prompt.endswith(f"Your card: {card}")
    assert "legal moves" not in prompt and "Kuhn poker" not in prompt and "\\boxed" not in prompt
    assert role.format_move("bet") == "bet" and SeatRole("kuhn_poker").format_move("bet") == "\\boxed{bet}"


@pytest.mark.parametrize(
    "spec, expected",
    [("forfeit", InvalidMoves("forfeit")), ("retry:2", InvalidMoves("retry", 2)), ("random_legal", InvalidMoves("random_legal"))],
)
def test_invalid_moves_parse(spec, expected):
    assert InvalidMoves.parse(spec) == expected


@pytest.mark.parametrize("spec", ["retry", "retry:0", "retry:x", "forfeit:1", "explode"])
def test_invalid_moves_parse_names_the_choices(spec):
    with pytest.raises(ValueError, match="forfeit', 'retry:N'"):
        InvalidMoves.parse(spec)


DEMONSTRABLE = [g for g in games.list() if not g.startswith(("graph/", "textarena/")) and g != "task_forge"]


@pytest.mark.parametrize("game", DEMONSTRABLE)
def test_the_demonstrations_are_every_legal_opening_move_in_the_format_or_refused_for_free_text(game):
    env = games.make(game)
    env.reset(seed=0)
    agent = env.agent_selection
    if env.move_names is None and not env.choosable(agent):
        with pytest.raises(ValueError, match="moves are free text"):
            demonstrations(game)
        return
    shown = demonstrations(game)
    assert {example for example, _ in shown} == {env.observe(agent)["prompt"]}
    moves = [SeatRole(game).parse(env, agent, answer) for _, answer in shown]
    assert all(p.valid for p in moves) and all("\\boxed{" in answer for _, answer in shown)
    assert [p.move for p in moves] == env.legal_moves(agent)


def test_a_demonstrated_prompt_shows_the_drawn_example_turn_between_the_brief_and_the_state():
    plain = SeatRole("kuhn_poker").messages("state")
    for k, (example, answer) in enumerate(demonstrations("kuhn_poker")):
        shown = SeatRole("kuhn_poker", demonstrate=True).drawn(k).messages("state")
        assert shown == [plain[0], {"role": "user", "content": example}, {"role": "assistant", "content": answer}, plain[1]]
    assert [a for _, a in demonstrations("kuhn_poker")] == ["I play check.\n\\boxed{check}", "I play bet.\n\\boxed{bet}"]
    assert SeatRole("kuhn_poker", compact=True, demonstrate=True).messages("rules\n\nstate") == "state"
    assert SeatRole("kuhn_poker").drawn(1) == SeatRole("kuhn_poker") and SeatRole("kuhn_poker").variants == (SeatRole("kuhn_poker"),)


def shown_examples(seeds, on_turn=None) -> list[str]:
    """The example answer each turn of Kuhn matches (random players, demonstrated seats) showed."""
    from games.play import RandomPlayer
    from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
    from marl.scripted import ScriptedPolicy

    shown = []

    class Seen(ScriptedPolicy):
        def act(self, requests):
            shown.extend(r.messages[2]["content"] for r in requests)
            return super().act(requests)

    seat = SeatSpec(Seen("random", RandomPlayer), "random", demonstrate=True)
    RolloutEngine(on_turn=on_turn).play([MatchSpec("kuhn_poker", s, {"player_0": seat, "player_1": seat}) for s in seeds])
    return shown


def test_play_draws_the_example_per_turn_reproducibly_and_shows_each_move_about_equally():
    """Shown one fixed example, SmolLM2 copies its move and self-play locks it in (docs/training.md):
    the move shown is drawn per turn by the match's seed and the turn's index."""
    first = shown_examples(range(200))
    assert first == shown_examples(range(200)), "the same matches show the same examples"
    bets = sum("bet" in answer for answer in first) / len(first)
    assert 0.4 < bets < 0.6, bets


def test_a_transcript_shows_the_example_each_turn_was_shown():
    import io

    from rich.console import Console

    from coevo.transcript import TranscriptPrinter

    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=400), show_prompt=True)
    shown = shown_examples([3, 4, 5], on_turn=printer.turn)
    printed = [line for line in out.getvalue().splitlines() if line.startswith("I play ")]
    assert printed == [answer.splitlines()[0] for answer in shown] and len(set(printed)) == 2


def test_a_demonstrated_seat_is_scored_as_it_plays_the_mean_over_its_examples():
    """Forced-choice scoring reads the exact strategy: with a demonstration each move is scored
    written the demonstrated way, after each example turn play may show, and the strategy logged
    is their mean (play draws them uniformly), not one of prompts the member never sees."""
    from coevo.evaluators import strategy_of
    from games.kuhn_analysis import INFOSETS
    from marl.evaluate import kuhn_infoset, kuhn_strategy, move_probabilities
    from marl.models import load_tiny
    from marl.policy import Request
    from tests.runs import scored_member

    shown = SeatRole("kuhn_poker", demonstrate=True)
    assert shown.format_move("bet") == "I play bet.\n\\boxed{bet}"
    policy = load_tiny()
    read = strategy_of(scored_member(policy, demonstrate=True))
    each = []  # the probability of bet or call after each example, scored one at a time
    for example in shown.variants:
        states = [kuhn_infoset(key) for key in INFOSETS]
        asked = [(Request(example.messages(env.observe(agent)["prompt"])), env.legal_moves(agent)) for env, agent in states]
        each.append([probs[1] for probs in move_probabilities(policy, asked, example, 1.0)])  # check/fold, bet/call
    assert list(read.values()) == pytest.approx([(a + b) / 2 for a, b in zip(*each)], abs=1e-6)
    assert each[0] != pytest.approx(each[1], abs=1e-6), "the examples prompt different policies"
    assert read != kuhn_strategy(policy, role=SeatRole("kuhn_poker")), "the plain prompt is another policy"


@pytest.mark.slow
def test_smollm2_writes_the_format_when_shown_it_and_almost_never_when_told(smollm2):
    """Why rollout.demonstration exists: measured on 64 opening turns at temperature 1, told the
    format alone SmolLM2-135M boxed a legal move in 0-2 of 64; shown one example turn, in 14."""
    from marl.policy import Request, Sampling

    env = games.make("kuhn_poker")
    valid = {}
    for demonstrate in (False, True):
        role, requests = SeatRole("kuhn_poker", demonstrate=demonstrate), []
        for seed in range(32):
            env.reset(seed=seed)
            requests.append(Request(role.messages(env.observe(env.agent_selection)["prompt"]), Sampling(1.0, 1.0, 40), seed=seed))
        texts = [r.text for r in smollm2.act(requests)]
        valid[demonstrate] = sum(role.parse(env, env.agent_selection, t).valid for t in texts)
    assert valid[False] <= 2 and valid[True] >= 4, valid


@pytest.mark.parametrize("demonstrate", [False, True])
def test_a_scripted_players_strategy_is_read_exactly_from_the_game_it_is_asked_in(demonstrate):
    """Scripted players answer from the live game a request carries, not from its text: the strategy
    read hands every variant's request the information set's env."""
    from games import SCRIPTED_PLAYERS, kuhn_analysis
    from marl.evaluate import kuhn_strategy
    from marl.scripted import ScriptedPolicy

    for name in ("always_bet", "never_bluff"):
        policy = ScriptedPolicy(name, SCRIPTED_PLAYERS["kuhn_poker"][name])
        known = getattr(kuhn_analysis, name)()
        read = kuhn_strategy(policy, role=SeatRole("kuhn_poker", demonstrate=demonstrate))
        assert read == {key: float(known[key]) for key in read}
