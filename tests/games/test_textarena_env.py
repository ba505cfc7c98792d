"""TextArena games behind the AEC API: what the adapter adds to TextArena's own rules."""

import games


def test_refused_moves_are_reported_in_infos():
    env = games.make("textarena/TicTacToe-v0")
    env.reset(seed=0)
    first = env.agent_selection
    env.step("no idea")  # TextArena refuses it and asks the same player again
    assert env.infos[first]["valid"] is False and "correct format" in env.infos[first]["reason"]
    assert env.agent_selection == first and not any(env.terminations.values())
    env.step("[4]")
    assert env.infos[first] == {"valid": True}
    second = env.agent_selection
    env.step("[4]")  # taken: refused once more
    env.step("[4]")  # and again: the mover loses by it
    assert env.infos[second]["valid"] is False and "occupied" in env.infos[second]["reason"]
    assert all(env.terminations.values()) and env.rewards[second] == -1


def test_a_seed_deals_the_same_match_after_earlier_matches():
    # TextArena's Kuhn keeps its deck across its own resets: each match must start from a fresh game.
    env = games.make("textarena/KuhnPoker-v0")
    for seed in range(5):
        env.reset(seed=seed)
    env.reset(seed=3)
    fresh = games.make("textarena/KuhnPoker-v0")
    fresh.reset(seed=3)
    for agent in env.possible_agents:
        assert env.observe(agent)["prompt"] == fresh.observe(agent)["prompt"]
