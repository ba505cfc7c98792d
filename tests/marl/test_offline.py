"""SFT and DPO from recorded episodes: the losses' values and gradients, and which turns they use."""

import json
import math
from pathlib import Path

import pytest

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from marl.episode import Episode, Turn
from marl.offline import dpo_loss, dpo_pairs, sft_loss, winning_turns


def _turn(index, seat, member, prompt, completion):
    return Turn(
        index=index, seat=seat, role=seat, member=member, observation="", prompt_ids=prompt,
        completion_ids=completion, logprobs=[0.0] * len(completion), text="", move="m", valid=True,
    )  # fmt: skip


def _episode(match, rewards, turns):
    return Episode(match_id=match, game="g", seed=0, members={t.seat: t.member for t in turns}, turns=turns, rewards=rewards)


def test_dpo_loss_matches_hand_computation_on_two_pairs():
    chosen = torch.tensor([-1.0, -2.0], requires_grad=True)
    rejected = torch.tensor([-3.0, -1.5], requires_grad=True)
    ref_c, ref_r, beta = torch.tensor([-1.5, -2.0]), torch.tensor([-2.5, -1.0]), 0.5
    loss = dpo_loss(chosen, rejected, ref_c, ref_r, beta)
    # pair 1: margin = (−1+1.5) − (−3+2.5) = 1.0; pair 2: margin = 0 − (−0.5) = 0.5
    expected = -(math.log(1 / (1 + math.exp(-0.5))) + math.log(1 / (1 + math.exp(-0.25)))) / 2
    assert abs(loss.item() - expected) < 1e-6
    loss.backward()
    assert (chosen.grad < 0).all() and (rejected.grad > 0).all()  # descent raises chosen, lowers rejected
    # d/dchosen_i = −β·σ(−β·m_i)/P
    assert abs(chosen.grad[0].item() + 0.5 * (1 / (1 + math.exp(0.5))) / 2) < 1e-6


def test_sft_loss_is_mean_nll_of_completions():
    assert abs(sft_loss(torch.tensor([-1.5, -2.0])).item() - (1.5 + 2.0) / 2) < 1e-6


def test_winning_turns_keep_only_winners_and_not_draws():
    a, b = _turn(0, "p0", "alice", [1], [2]), _turn(1, "p1", "bob", [1], [3])
    won = _episode("m1", {"p0": 1.0, "p1": -1.0}, [a, b])
    draw = _episode("m2", {"p0": 0.0, "p1": 0.0}, [_turn(0, "p0", "alice", [4], [5])])
    assert winning_turns([won, draw]) == {"alice": [a]}


def test_pairs_choose_won_reject_lost_prefer_same_prompt():
    won_a = _turn(0, "p0", "alice", [7], [1])
    lost_a_other = _turn(0, "p0", "alice", [8], [2])
    lost_a_same = _turn(2, "p1", "alice", [7], [3])
    e1 = _episode("m1", {"p0": 1.0, "p1": -1.0}, [won_a, _turn(1, "p1", "bob", [9], [4])])
    e2 = _episode("m2", {"p0": -1.0, "p1": 1.0}, [lost_a_other, _turn(1, "p1", "bob", [9], [5])])
    e3 = _episode("m3", {"p0": 1.0, "p1": -1.0}, [_turn(0, "p0", "bob", [6], [6]), lost_a_same])
    pairs = {p.member: p for p in dpo_pairs([e1, e2, e3])}
    assert pairs["alice"].chosen == won_a and pairs["alice"].rejected == lost_a_same


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["a", "b", "c"]), st.booleans(),
                          st.integers(0, 2)), max_size=8))
def test_pairs_never_cross_members_and_label_by_outcome(games):
    episodes = [
        _episode(f"m{i}", {"p0": 1.0 if first else -1.0, "p1": -1.0 if first else 1.0},
                 [_turn(0, "p0", m0, [k], [k + 1]), _turn(0, "p1", m1, [k], [k + 2])])
        for i, (m0, m1, first, k) in enumerate(games)
    ]  # fmt: skip
    for pair in dpo_pairs(episodes):
        assert pair.chosen.member == pair.rejected.member == pair.member
        for turn, won in ((pair.chosen, True), (pair.rejected, False)):
            episode = next(e for e in episodes if any(t is turn for t in e.turns))
            assert (episode.rewards[turn.seat] > 0) == won


def _samples(policy, moves):
    from marl.learner import TrainSample

    prompt = policy.encode([[{"role": "user", "content": "Your card is K. Bet or check?"}]])[0]
    ids = [policy.tokenizer(f"\\boxed{{{m}}}", add_special_tokens=False)["input_ids"] for m in moves]
    return [TrainSample(prompt, c, 1.0) for c in ids]


def _nll(policy, samples):
    with torch.no_grad():
        lp, real, _ = policy.completion_logprobs([s.prompt_ids for s in samples], [s.completion_ids for s in samples], [None] * len(samples))
    return [-(lp[i][real[i]]).sum().item() for i in range(len(samples))]


def test_learner_sft_loss_is_the_winning_completions_mean_nll_and_lowers_it():
    from marl.learner import Learner, OptimConfig
    from marl.models import load_tiny

    policy = load_tiny(5)
    batch = _samples(policy, ["bet", "check", "bet"])
    before = _nll(policy, batch)
    stats = Learner(policy, OptimConfig(algorithm="sft", epochs=2, lr=1e-3)).update(batch)
    assert abs(stats["loss/sft/first_epoch"] - sum(before) / 3) < 1e-4
    assert sum(_nll(policy, batch)) < sum(before)


def test_learner_dpo_starts_at_log2_and_moves_chosen_over_rejected():
    from marl.learner import Learner, OptimConfig
    from marl.models import load_tiny

    policy = load_tiny(6)
    batch = _samples(policy, ["bet", "check"])  # one pair: chosen "bet", rejected "check"
    before = _nll(policy, batch)
    stats = Learner(policy, OptimConfig(algorithm="dpo", dpo_beta=0.5, epochs=3, lr=1e-3)).update(batch)
    assert abs(stats["loss/dpo/first_epoch"] - math.log(2)) < 1e-5  # policy = reference: margin 0
    after = _nll(policy, batch)
    assert (before[0] - after[0]) - (before[1] - after[1]) > 0  # chosen gained on rejected


@pytest.mark.parametrize("algorithm", ["sft", "dpo"])
def test_coevo_train_learns_offline_end_to_end(tmp_path, algorithm):
    from typer.testing import CliRunner

    from coevo.cli import app

    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "offline.toml"
    config.write_text(
        f'extends = "{root / "examples" / "kuhn_tiny.toml"}"\niterations = 2\ncheckpoint_every = 2\n'
        f'[rollout]\nmatches = 16\nconcurrency = 16\n[optim]\nalgorithm = "{algorithm}"\n'
        '[eval]\nevery = 2\nmatches = 8\nopponents = ["random"]\n'
    )
    result = CliRunner().invoke(app, ["train", str(config), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    losses = [v for e in events for k, v in e.items() if k.endswith(f"loss/{algorithm}/first_epoch")]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)


def test_bad_algorithm_is_a_one_line_error_naming_the_field():
    from typer.testing import CliRunner

    from coevo.cli import app

    root = Path(__file__).resolve().parents[2]
    bad = CliRunner().invoke(app, ["config", "show", str(root / "examples" / "kuhn_tiny.toml"), "--set", "optim.algorithm=kto"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1 and "optim.algorithm" in bad.output


def test_offline_window_learns_from_the_runs_earlier_shards(tmp_path):
    """With ``offline_window = 2`` each iteration's SFT batch is the winning turns of its own shard
    and the one before it on disk; the first iteration has no earlier shard."""
    from typer.testing import CliRunner

    from coevo.cli import app
    from marl.episode import read_jsonl
    from marl.offline import winning_turns

    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "window.toml"
    config.write_text(
        f'extends = "{root / "examples" / "kuhn_tiny.toml"}"\niterations = 3\ncheckpoint_every = 3\n'
        '[rollout]\nmatches = 8\nconcurrency = 8\n[optim]\nalgorithm = "sft"\noffline_window = 2\n[eval]\nevery = 0\n'
    )
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(config), "--run-dir", str(run)])
    assert result.exit_code == 0, result.output
    shards = {int(p.stem.split("_")[1]): read_jsonl(p) for p in (run / "episodes").glob("iter_*.jsonl")}
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    seen = {e["iteration"]: sum(v for k, v in e.items() if k.endswith("offline/turns")) for e in events if e.get("kind") == "iteration"}
    assert len(seen) == 3
    for i, turns in seen.items():
        window = shards.get(i - 1, []) + shards[i]
        assert turns == sum(map(len, winning_turns(window).values())), i
    assert any(turns > sum(map(len, winning_turns(shards[i]).values())) for i, turns in seen.items())  # the window was used
