"""The rollout engine: every game with every kind of player, invalid-move handling, batching exactly
equal to one match at a time, and the batch kept full."""

import pytest

import games
from games.core import bare
from marl.episode import Episode
from marl.policy import Request, Sampling
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import HumanPolicy, ScriptedPolicy
from games.formats import extract_answer
from roles.seat import InvalidMoves

SHORT = Sampling(0.7, 1.0, 12)


def scripted(game, name):
    return SeatSpec(ScriptedPolicy(name, games.scripted_players(game)[name]), name)


def check_episode(ep, env_info=None):
    assert ep.turns, "a match has at least one turn"
    assert [t.index for t in ep.turns] == list(range(len(ep.turns)))
    for t in ep.turns:
        assert len(t.logprobs) == len(t.completion_ids)
        assert t.valid == (t.move is not None) and (t.valid or t.reason)
    if env_info is not None and env_info.zero_sum and not any(t.penalty for t in ep.turns) and not ep.forfeited_by:
        assert sum(ep.rewards.values()) == pytest.approx(0)


def seated(game, first, rest):
    """``first`` in the game's first seat, ``rest`` in every other (task forge has three or four)."""
    agents = games.make(game).possible_agents
    return {agents[0]: first, **dict.fromkeys(agents[1:], rest)}


def model_specs(policy, name, game, seed, invalid="random_legal", choose=True):
    """The model against the game's first scripted player (or itself), plus a forced-choice match."""
    model = SeatSpec(policy, name, sampling=SHORT, invalid=InvalidMoves.parse(invalid))
    others = games.scripted_players(game)
    opponent = scripted(game, next(iter(others))) if others else model
    kwargs = {"max_cycles": 3} if game == "classic/rps-v2" else {}  # 3 rounds, not 15
    specs = [MatchSpec(game, seed, seated(game, model, opponent), f"{game}-{name}", kwargs)]
    if choose and games.make(game).move_names is not None:
        chooser = SeatSpec(policy, name, mode="choose", sampling=SHORT)
        specs.append(MatchSpec(game, seed, seated(game, opponent, chooser), f"{game}-{name}-choose", kwargs))
    return specs


def test_every_game_with_the_tiny_model_and_scripted_players(tiny):
    specs = [s for game in games.list() for s in model_specs(tiny, "tiny", game, seed=1)]
    for game in games.list():
        for name in games.scripted_players(game):
            seat = scripted(game, name)
            specs.append(MatchSpec(game, 2, seated(game, seat, seat), match_id=f"{game}-{name}"))
    episodes = RolloutEngine(concurrency=64).play(specs)
    assert [e.match_id for e in episodes] == [s.match_id for s in specs]
    for spec, ep in zip(specs, episodes):
        env = games.make(spec.game)
        check_episode(ep, getattr(env, "info", None))
        assert {t.member for t in ep.turns} <= {s.member for s in spec.seats.values()}
    chosen = [t for ep in episodes for t in ep.turns if t.mode == "choose"]
    assert chosen and all(t.valid and t.completion_ids for t in chosen), "forced choice always plays a legal move"


@pytest.mark.slow
def test_every_game_with_smollm2(smollm2):
    # Forfeit on invalid output keeps each match short; valid answers play on. Forced choice, which
    # never forfeits, is played in two games here (all of them with the tiny model above).
    specs = [
        s for game in games.list()
        for s in model_specs(smollm2, "smollm2-135m", game, 3, "forfeit", choose=game in ("kuhn_poker", "tictactoe"))
    ]  # fmt: skip
    episodes = RolloutEngine(concurrency=64).play(specs)
    for ep in episodes:
        check_episode(ep)
    generated = [(ep.game, t) for ep in episodes for t in ep.turns if t.member == "smollm2-135m" and t.mode == "generate"]
    assert {game for game, _ in generated} == set(games.list()), "SmolLM2 wrote in every game"
    # In 12 tokens the untrained model rarely reaches its \boxed{} answer: what it wrote is an invalid
    # move with its reason, never a move guessed from a mention (it used to be read as one).
    named = {game for game in games.list() if games.make(game).move_names is not None}  # moves are names
    for game, t in generated:
        if t.valid and game in named:
            answer = extract_answer(t.text)
            assert bare(t.text if answer is None else answer) == t.move, f"{game}: {t.move!r} read from {t.text!r}"


class Typist:
    """A human at the keyboard, typing the given lines in turn."""

    def __init__(self, *lines):
        self.lines = list(lines)

    def __call__(self, prompt):
        return self.lines.pop(0)


def human(*lines, invalid="forfeit"):
    return SeatSpec(HumanPolicy(ask=Typist(*lines), show=lambda text: None), "human", invalid=InvalidMoves.parse(invalid))


def play_one(game, p0, p1, seed=0):
    [ep] = RolloutEngine().play([MatchSpec(game, seed, {"player_0": p0, "player_1": p1})])
    return ep


def test_humans_play_by_typing_moves():
    ep = play_one("tictactoe", human("b2", "A1!", "\\boxed{c3}"), human("a2", "[b1]"))
    assert [t.move for t in ep.turns] == ["b2", "a2", "a1", "b1", "c3"]
    assert ep.rewards == {"player_0": 1.0, "player_1": -1.0}  # the a1-b2-c3 diagonal


def test_task_forge_turns_the_game_judged_invalid_are_recorded_as_such_and_the_match_goes_on():
    seats = {
        "proposer": human("<task>What is 6 * 7?</task><program>print(6 * 7)</program>"),
        "executor": human("It is 42", "\\boxed{42}", "\\boxed{\\text{42}}", "I keep it"),
        "verifier": human("\\boxed{accept}", "Looks right to me, I accept"),
    }
    [ep] = RolloutEngine().play([MatchSpec("task_forge", 0, seats, game_kwargs={"attempts": 2, "tool_calls": 0})])
    got = [(t.seat, t.tag, t.valid, t.reason) for t in ep.turns]
    assert got == [
        ("proposer", "propose", True, ""),
        ("executor", "attempt:0", False, "no \\boxed{answer} in the output"),
        ("verifier", "judge:0", True, ""),
        ("executor", "revise:0", True, ""),
        ("executor", "attempt:1", True, ""),
        ("verifier", "judge:1", False, "no \\boxed{accept} or \\boxed{reject} in the judgement"),
        ("executor", "revise:1", False, "no \\boxed{answer} in the revision: the first answer stands"),
    ]
    assert all(t.move is None for t in ep.turns if not t.valid) and all(t.action for t in ep.turns)
    assert [a["revised_correct"] for a in ep.outcome["attempts"]] == [True, True]


def test_output_past_the_cap_is_cut_before_parsing_and_recorded():
    typist = Typist("b2" + " " * 50 + "\\boxed{a1}", "give up")  # the second, invalid, forfeits
    cap = SeatSpec(HumanPolicy(ask=typist, show=lambda text: None), "human", max_output_chars=10)
    [ep] = RolloutEngine().play([MatchSpec("tictactoe", 0, {"player_0": cap, "player_1": scripted("tictactoe", "random")})])
    first = ep.turns[0]
    assert (first.text, first.move, first.cut_chars) == ("b2        ", "b2", 52)


def test_lone_surrogates_in_output_never_reach_the_records():
    [ep] = RolloutEngine().play([MatchSpec("tictactoe", 0, {"player_0": human("b2\ud800", "\ud800"), "player_1": human("a1")})])
    assert ep.turns[0].text == "b2\ufffd" and ep.turns[0].move == "b2"
    assert Episode.model_validate_json(ep.model_dump_json()) == ep


def test_retry_then_forfeit_records_each_reason():
    ep = play_one("kuhn_poker", human("hmm", "", "\\boxed{raise}", invalid="retry:2"), scripted("kuhn_poker", "nash"))
    assert [(t.attempt, t.valid) for t in ep.turns] == [(0, False), (1, False), (2, False)]
    assert ep.turns[0].reason.startswith("no \\boxed{} answer") and "'raise'" in ep.turns[2].reason
    assert ep.forfeited_by == "player_0"
    assert ep.rewards == {"player_0": -1.0, "player_1": 1.0}


def test_retry_recovers_when_the_next_answer_is_valid():
    ep = play_one("kuhn_poker", human("pass the salt", "\\boxed{bet}", "\\boxed{call}", invalid="retry:1"), scripted("kuhn_poker", "always_bet"))
    assert (ep.turns[0].valid, ep.turns[1].move) == (False, "bet")
    assert ep.forfeited_by is None


def test_forfeit_ends_the_match_with_configured_rewards():
    rule = InvalidMoves("forfeit", penalty=-1.5, opponent_reward=0.5)  # SPIRAL's training values
    seat = SeatSpec(HumanPolicy(ask=Typist("\U0001f600 \x00 garbage"), show=lambda t: None), "human", invalid=rule)
    ep = play_one("leduc_holdem", seat, scripted("leduc_holdem", "heuristic"))
    assert len(ep.turns) == 1 and ep.turns[0].penalty == -1.5
    assert ep.rewards == {"player_0": -1.5, "player_1": 0.5}


def test_random_legal_plays_on_with_a_penalty():
    ep = play_one("tictactoe", human("?", "?", "?", "?", "?", invalid="random_legal"), scripted("tictactoe", "random"), seed=4)
    mine = [t for t in ep.turns if t.seat == "player_0"]
    assert all(not t.valid and t.action in games.tictactoe.MOVES and t.penalty == -1 for t in mine)
    outcome = sum(t.penalty for t in mine)
    assert ep.rewards["player_0"] - outcome in (-1, 0, 1)  # the game's own result, then the penalties


def test_empty_and_garbage_model_output_never_raise(tiny):
    for text in ["", " ", "\\boxed{", "]]][[[", "\\boxed{\\boxed{}}", "a" * 5000, "\ud7ff\U0010ffff"]:
        ep = play_one("kuhn_poker", human(text, invalid="random_legal"), scripted("kuhn_poker", "random"))
        assert not ep.turns[0].valid and ep.turns[0].reason


def test_textarena_random_legal_falls_back_to_forfeit():
    ep = play_one("textarena/TicTacToe-v0", human("nothing", invalid="random_legal"), human("[4]"))
    assert ep.forfeited_by == "player_0"


def test_forced_choice_needs_a_move_list(tiny):
    chooser = SeatSpec(tiny, "tiny", mode="choose")
    with pytest.raises(ValueError, match="forced choice needs a game with a move list"):
        play_one("simple_negotiation", chooser, chooser)


def test_batched_rollouts_equal_one_at_a_time(tiny):
    greedy = SeatSpec(tiny, "tiny", sampling=Sampling(0, 1, 10), invalid=InvalidMoves.parse("random_legal"))
    chooser = SeatSpec(tiny, "tiny", mode="choose", sampling=Sampling(0, 1, 10))
    specs = [
        MatchSpec(game, seed, {"player_0": seat, "player_1": scripted(game, "random")})
        for game in ("tictactoe", "kuhn_poker", "leduc_holdem")
        for seed in range(4)
        for seat in (greedy, chooser)
    ]
    batched = RolloutEngine(concurrency=64).play(specs)
    alone = RolloutEngine(concurrency=1).play(specs)
    for a, b in zip(batched, alone):
        assert [(t.move, t.action, t.completion_ids) for t in a.turns] == [(t.move, t.action, t.completion_ids) for t in b.turns]
        assert a.rewards == b.rewards
        for ta, tb in zip(a.turns, b.turns):
            assert ta.logprobs == pytest.approx(tb.logprobs, abs=1e-4)


class CountingPolicy:
    """Wraps a policy and records the size of every batch it is asked for."""

    def __init__(self, inner):
        self.inner, self.name, self.batches = inner, inner.name, []

    def act(self, requests):
        self.batches.append(len(requests))
        return self.inner.act(requests)

    def score(self, requests, candidates):
        self.batches.append(len(requests))
        return self.inner.score(requests, candidates)


def test_one_call_per_step_and_the_batch_kept_full(tiny):
    counting = CountingPolicy(tiny)
    seat = SeatSpec(counting, "tiny", sampling=Sampling(0, 1, 4), invalid=InvalidMoves.parse("random_legal"))
    specs = [MatchSpec("tictactoe", seed, {"player_0": seat, "player_1": seat}) for seed in range(40)]
    episodes = RolloutEngine(concurrency=16).play(specs)
    turns = sum(len(ep.turns) for ep in episodes)
    assert sum(counting.batches) == turns  # every turn asked exactly once
    assert max(counting.batches) == 16
    # While matches wait in the queue, finished ones are replaced at once: the batch stays full
    # until the queue is empty, then drains as the last 16 matches (at most 9 turns each) end.
    full_until = next(i for i, n in enumerate(counting.batches) if n < 16)
    assert sum(counting.batches[:full_until]) >= turns - 16 * 9


def test_requests_carry_the_seat_and_seed():
    seen: list[Request] = []

    class Recorder(ScriptedPolicy):
        def act(self, requests):
            seen.extend(requests)
            return super().act(requests)

    seat = SeatSpec(Recorder("random", games.scripted_players("kuhn_poker")["random"]), "random")
    play_one("kuhn_poker", seat, seat, seed=5)
    assert [r.agent for r in seen][:2] == ["player_0", "player_1"]
    assert len({r.seed for r in seen}) == len(seen)


@pytest.mark.parametrize("game", games.list())
def test_every_game_with_a_human_at_the_keyboard(game):
    # A human who types nothing useful: random legal moves are played for them (TextArena,
    # which has no move list, ends the match by forfeit instead).
    seat = SeatSpec(HumanPolicy(ask=lambda prompt: "?", show=lambda text: None), "human", invalid=InvalidMoves.parse("random_legal"))
    kwargs = {"max_cycles": 3} if game == "classic/rps-v2" else {}
    [ep] = RolloutEngine().play([MatchSpec(game, 0, seated(game, seat, seat), game_kwargs=kwargs)])
    check_episode(ep)
    if game == "task_forge":  # the game reads every text itself: "?" is a move, and an invalid task
        assert not ep.outcome["valid_task"] and "<task>" in ep.outcome["invalid_reason"]
        return
    if game.startswith("graph/") and ep.outcome["invalid_task"]:  # a graph's writer: "?" is no task, and the match ends
        assert len(ep.turns) == 1 and "<task>" in ep.outcome["invalid_task"]
        return
    if game.startswith("graph/"):  # likewise: "?" is a plan or a critique, and no answer or verdict
        assert all(t.valid or t.reason.startswith("no \\boxed{") for t in ep.turns) and ep.forfeited_by is None
        assert not ep.turns[-1].valid, "the scored answer"
        return
    assert all(not t.valid for t in ep.turns)
    assert ep.forfeited_by is not None if game.startswith("textarena/") else ep.forfeited_by is None
