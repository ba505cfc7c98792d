"""PAIRED: the regret estimate by hand, the curriculum's pull towards tasks the antagonist solves and
the protagonist does not, proposals inside the task space, exact resume, and `coevo train` with it."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from coevo.cli import app
from games.task_forge.curricula import PAIRED, check_curriculum, difficulty_level, estimated_regret
from games.task_forge.players import CurriculumProposer, SkilledAntagonist
from tests.runs import events

FAMILIES = ["arith", "logic"]
EXAMPLES = Path(__file__).parents[2] / "examples"


class ThresholdExecutor:
    """A scripted executor of known competence: it solves every task of a family below its
    difficulty threshold there, and none above."""

    def __init__(self, thresholds: dict[str, float]):
        self.thresholds = thresholds

    def success(self, family: str, knobs: np.ndarray) -> float:
        return float(np.mean(knobs) < self.thresholds[family])

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def test_regret_is_the_antagonists_mean_success_minus_the_protagonists():
    assert estimated_regret([]) == 0.0
    assert estimated_regret([[1.0, 0.25], [0.5, 0.5], [0.75, 0.0]]) == pytest.approx(0.75 - 0.25)
    teacher = PAIRED(["solo"], ThresholdExecutor({"solo": 1.0}), levels=2, window=2, temperature=0.5, exploration=0.2)
    for antagonist, protagonist in [(0.0, 1.0), (1.0, 0.5), (0.75, 0.25)]:  # the first falls out of the window of 2
        teacher.update_pair("solo", np.array([0.2, 0.3]), antagonist, protagonist)
    teacher.update_pair("solo", np.array([0.9, 0.7]), 0.5, 0.75)
    assert teacher.regrets().tolist() == [[pytest.approx((1.0 + 0.75) / 2 - (0.5 + 0.25) / 2), pytest.approx(-0.25)]]
    e = math.exp((0.5 - -0.25) / 0.5)  # softmax(R / τ), shifted by the max
    assert teacher.probabilities()[0].tolist() == pytest.approx([0.8 * e / (e + 1) + 0.1, 0.8 / (e + 1) + 0.1])


def test_update_asks_the_antagonist_to_play_the_same_task():
    teacher = PAIRED(FAMILIES, ThresholdExecutor({"arith": 0.5, "logic": 0.0}))
    teacher.update("arith", np.array([0.1, 0.3]), 0.25)  # level 1: the antagonist solves it
    teacher.update("logic", np.array([0.1, 0.3]), 0.25)  # the antagonist fails every logic task
    assert teacher.pairs[0][1] == [[1.0, 0.25]] and teacher.pairs[1][1] == [[0.0, 0.25]]
    assert teacher.regrets()[:, 1].tolist() == [0.75, -0.25]


def test_concentrates_where_the_antagonist_succeeds_and_the_protagonist_fails():
    """arith: the antagonist solves difficulty < 0.6 (levels 0–2), the protagonist < 0.2 (level 0):
    regret 1 on levels 1 and 2, 0 elsewhere. logic: both solve < 0.4: regret 0 everywhere."""
    antagonist = ThresholdExecutor({"arith": 0.6, "logic": 0.4})
    protagonist = ThresholdExecutor({"arith": 0.2, "logic": 0.4})
    teacher, rng = PAIRED(FAMILIES, antagonist, levels=5), np.random.default_rng(3)
    arms = []
    for _ in range(400):
        family, knobs = teacher.propose(rng)
        arms.append((family, difficulty_level(knobs, 5)))
        teacher.update(family, knobs, protagonist.success(family, knobs))
    late = arms[100:]
    regretful = sum(arm in {("arith", 1), ("arith", 2)} for arm in late) / len(late)
    # (1 − ε) of proposals go almost all to the two arms of regret 1, and ε spreads 2/10 of its share there.
    assert regretful > 0.85, regretful
    expected = np.zeros((2, 5))
    expected[0, 1:3] = 1.0
    assert teacher.regrets().tolist() == expected.tolist()


def test_a_skilled_antagonist_marks_the_difficulties_past_a_weaker_executor():
    """With the antagonist at skill 0.7 and the protagonist fixed at 0.1, regret peaks midway (0.4):
    most proposals sit in levels 1–3 (difficulty 0.2–0.8), few at the extremes where both agree."""
    teacher, rng = PAIRED(["arith"], SkilledAntagonist(skill=0.7, families=("arith",))), np.random.default_rng(0)
    levels = []
    for _ in range(300):
        family, knobs = teacher.propose(rng)
        p = 1 / (1 + math.exp(-8 * (0.1 - knobs.mean())))
        teacher.update(family, knobs, rng.binomial(8, p) / 8)
        levels.append(difficulty_level(knobs, 5))
    middle = np.mean([1 <= lv <= 3 for lv in levels[100:]])
    assert middle > 0.8, middle


def test_the_antagonist_is_seeded_and_learns_from_its_attempts():
    a, b = (SkilledAntagonist(seed=1, families=tuple(FAMILIES)) for _ in range(2))
    knobs = np.array([0.4, 0.4])
    runs = [[x.success("arith", knobs) for _ in range(20)] for x in (a, b)]
    assert runs[0] == runs[1] and all(r * 8 == int(r * 8) for r in runs[0])  # k = 8 attempts each
    assert a.executor.skills["arith"] > 0.4 and a.executor.skills["logic"] == 0.4  # practice at its edge raises skill
    assert a.state_dict()["played"] == 20


@pytest.mark.parametrize("dims", [2, 3])
def test_conformance(dims):
    check_curriculum(lambda: PAIRED(FAMILIES, SkilledAntagonist(families=tuple(FAMILIES)), dims=dims, window=3))


@given(
    history=st.lists(
        st.tuples(
            st.sampled_from(FAMILIES), st.lists(st.floats(0, 1), min_size=2, max_size=2),
            st.floats(0, 1), st.floats(0, 1),
        ),  # fmt: skip
        max_size=30,
    ),
    window=st.integers(1, 5),
    temperature=st.floats(1e-3, 10),
    exploration=st.floats(0, 1),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None)
def test_state_stays_a_distribution_and_proposals_stay_in_the_task_space(history, window, temperature, exploration, seed):
    teacher = PAIRED(FAMILIES, ThresholdExecutor({}), levels=4, window=window, temperature=temperature, exploration=exploration)
    rng = np.random.default_rng(seed)
    for family, knobs, antagonist, protagonist in history:
        teacher.update_pair(family, np.array(knobs), antagonist, protagonist)
        assert all(len(arm) <= window for arms in teacher.pairs for arm in arms)
        r, p = teacher.regrets(), teacher.probabilities()
        assert np.all((r >= -1) & (r <= 1)) and np.all(p >= exploration / p.size - 1e-12)
        assert p.sum() == pytest.approx(1.0)
    for _ in range(5):
        family, knobs = teacher.propose(rng)
        assert family in FAMILIES and knobs.shape == (2,) and np.all((knobs >= 0) & (knobs <= 1))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: PAIRED(FAMILIES, None), "antagonist"),
        (lambda: PAIRED(FAMILIES, SkilledAntagonist(), window=0), "window"),
        (lambda: PAIRED(FAMILIES, SkilledAntagonist(), temperature=0), "temperature"),
        (lambda: PAIRED(FAMILIES, SkilledAntagonist(), exploration=1.5), "exploration"),
        (lambda: PAIRED(FAMILIES, SkilledAntagonist()).update_pair("arith", [0.5, 0.5], 1.5, 0.0), "success"),
        (lambda: PAIRED(FAMILIES, SkilledAntagonist()).update("chess", [0.5, 0.5], 1.0), "unknown family"),
        (lambda: PAIRED(FAMILIES, SkilledAntagonist()).load_state_dict(PAIRED(FAMILIES, SkilledAntagonist(), window=3).state_dict()), "window"),
    ],
)
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_coevo_train_with_a_paired_proposer(tmp_path):
    """Two iterations of task forge with ``scripted:paired`` in the proposer's seat: the antagonist
    played every valid task the executor did, and the curriculum's pairs are in the checkpoint."""
    run = CliRunner().invoke(app, [
        "train", str(EXAMPLES / "task_forge_scripted.toml"), "--run-dir", str(tmp_path / "run"), "--quiet", "--iterations", "2",
        "--set", "roles.proposer.player='scripted:paired'", "--set", "rollout.matches=8", "--set", "eval.every=2",
        "--set", "checkpoint_every=2",
    ])  # fmt: skip
    assert run.exit_code == 0, run.output
    log = [r for r in events(tmp_path / "run") if r["kind"] == "iteration"]
    learned = sum(r["proposer/learned_from"] for r in log)
    state = json.loads((tmp_path / "run" / "checkpoints" / "iter_000002" / "state.json").read_text())["scripted"]["proposer"]
    assert learned > 0 and sum(len(arm) for arms in state["pairs"] for arm in arms) == learned
    assert state["antagonist"]["played"] == learned and 0 <= log[-1]["eval/executor/heldout_accuracy"] <= 1


def test_a_misspelt_curriculum_is_one_line_naming_the_field():
    result = CliRunner().invoke(app, ["train", str(EXAMPLES / "task_forge_scripted.toml"), "--set", "roles.proposer.player='scripted:pared'"])
    assert result.exit_code == 2, result.output
    assert "roles.proposer.player" in result.output and "paired" in result.output and len(result.output.strip().splitlines()) == 1


def test_the_named_proposer_is_paired_against_a_stronger_antagonist():
    proposer = CurriculumProposer.named("paired")
    assert isinstance(proposer.curriculum, PAIRED) and proposer.curriculum.antagonist.executor.skills["arithmetic"] == 0.4
