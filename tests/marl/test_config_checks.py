"""Config mistakes that used to pass the loader and fail later (or never): each is a ConfigError
naming the field, when the config loads."""

from pathlib import Path

import pytest

from marl.config import ConfigError
from marl.players import make_player
from coevo.config import load_run_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KUHN = EXAMPLES / "kuhn_tiny.toml"


def test_a_missing_hf_model_is_a_config_error_naming_the_field(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError, match=rf"model: .*no model at {missing}"):
        load_run_config(KUHN, [f'model="hf:{missing}"'])


def test_a_folder_without_a_model_is_no_model(tmp_path):
    with pytest.raises(ConfigError, match=rf"model: .*no model at {tmp_path}"):
        load_run_config(KUHN, [f'model="hf:{tmp_path}"'])


def test_a_missing_hf_role_player_is_a_config_error_naming_the_role(tmp_path):
    with pytest.raises(ConfigError, match=rf"roles.executor.player: no model at {tmp_path}"):
        load_run_config(EXAMPLES / "task_forge_tiny.toml", [f'roles.executor.player="hf:{tmp_path}"'])


@pytest.mark.parametrize(
    "change, message",
    [
        ("forge.tool_calls=1", "forge.choices: multiple choice leaves no turn for Python"),
        ('roles.proposer.player="tiny"', "forge.choices: the options come from the task's family"),
        ("forge.choices=0", r"roles.executor: mode = 'choose' cannot play this model \(set \[forge\] choices"),
        ('mode="choose"', None),  # the example as it is
    ],
)
def test_multiple_choice_and_forced_choice_fit_the_roles(change, message):
    if message is None:
        assert load_run_config(EXAMPLES / "task_forge_tiny_choice.toml", [change]).forge.choices >= 2
        return
    with pytest.raises(ConfigError, match=message):
        load_run_config(EXAMPLES / "task_forge_tiny_choice.toml", [change])


def test_a_missing_hf_player_is_refused_before_loading():
    with pytest.raises(ValueError, match="no model at /nowhere/model"):
        make_player("hf:/nowhere/model", "kuhn_poker")


def test_a_non_utf8_config_is_one_line(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('model = "tiny" # caf\xe9\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"{path}: not UTF-8 text"):
        load_run_config(path)


def test_a_directory_as_the_config_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=rf"{tmp_path}: a directory, not a config file"):
        load_run_config(tmp_path)


@pytest.mark.parametrize("bad", ["bogus", "past:0", "past:x", "past:-2", "past:"])
def test_an_unknown_eval_opponent_names_the_field_the_name_and_the_choices(bad):
    with pytest.raises(ConfigError) as err:
        load_run_config(KUHN, [f'eval.opponents=["random", "{bad}"]'])
    message = str(err.value)
    assert "eval.opponents" in message and repr(bad) in message
    assert all(name in message for name in ("initial", "past:K", "nash", "always_bet")), message


def test_eval_opponents_may_be_scripted_players_of_any_configured_game():
    cfg = load_run_config(KUHN, ["games.tictactoe=1.0", 'eval.opponents=["minimax", "nash", "initial", "past:3"]'])
    assert cfg.eval.opponents == ["minimax", "nash", "initial", "past:3"]
    with pytest.raises(ConfigError, match="eval.opponents.*'minimax'"):
        load_run_config(KUHN, ['eval.opponents=["minimax"]'])  # tic-tac-toe's, and this run plays Kuhn only


def test_an_unknown_population_opponent_lists_the_choices():
    with pytest.raises(ConfigError, match="population.opponents.*'gto'.*never_bluff"):
        load_run_config(EXAMPLES / "kuhn_population.toml", ['population.opponents=["gto"]'])


@pytest.mark.parametrize(
    "change, message",
    [
        ("game_options.maze.density=1.5", r"game_options.maze: density must be in \[0, 1\)"),
        ("game_options.maze.walls=3", r"game_options.maze: .*unexpected keyword argument 'walls'"),
        ("game_options.kuhn_poker.rounds=2", "game_options: kuhn_poker is not one of the run's games"),
    ],
)
def test_a_wrong_game_option_names_its_game_and_knob(change, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(EXAMPLES / "maze_tiny.toml", [change])


def test_a_population_run_makes_its_games_with_their_options():
    from coevo.planners import PopulationPlan
    from populations.population import Population

    config = load_run_config(EXAMPLES / "kuhn_population.toml", ["games:={maze=1.0}", "game_options.maze.size=3", 'mode="generate"', "eval.opponents=[]"])
    population = Population(config.population, "tiny", {}, config.seed)
    assert config.game_kwargs("maze") == {"size": 3}
    plans, evaluation = PopulationPlan(population, 4, 2, config.games, {"maze": config.game_kwargs("maze")}).plan(1)
    assert len(plans) == 4 and all(p.game_kwargs == {"size": 3} for p in [*plans, *evaluation])


@pytest.mark.parametrize(
    "changes, message",
    [
        (['mode="choose"'], "rollout.demonstration shows a free-text turn: it needs mode = 'generate'"),
        (["rollout.compact_prompts=true"], "rollout.demonstration shows a free-text turn"),
        (['games={maze=1.0}', "eval.every=0"], "rollout.demonstration: maze's moves are free text"),
    ],
)
def test_a_demonstration_needs_a_free_text_seat_turn_with_a_legal_move_to_show(changes, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(EXAMPLES / "kuhn_smollm2.toml", changes)
    load_run_config(EXAMPLES / "kuhn_smollm2.toml")  # the example as it is
