"""PettingZoo classic envs served as text: what the adapter adds to the inner env."""

import numpy as np

import games


def test_only_the_agent_to_move_has_moves():
    # PettingZoo's rlcard envs (Leduc) give every agent the mover's mask; the text must not.
    env = games.make("classic/leduc_holdem-v4")
    env.reset(seed=0)
    mover, other = env.agent_selection, next(a for a in env.possible_agents if a != env.agent_selection)
    assert env.legal_moves(mover) and env.legal_moves(other) == []
    obs = env.observe(other)
    assert not np.any(obs["action_mask"]) and obs["prompt"].endswith("No move for you now.")
