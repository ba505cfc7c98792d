"""Model loading: the embedded models and any causal LM from a local path, offline."""

import pytest

from marl.models import load_hf, load_tiny
from marl.players import make_player, model, player_names
from marl.policy import Request, Sampling

HELLO = [Request([{"role": "user", "content": "Your move?"}], Sampling(0, 1, 6))]


def test_tiny_is_the_same_model_for_the_same_seed():
    a, b, c = load_tiny(0), load_tiny(0), load_tiny(1)
    assert a.act(HELLO)[0].completion_ids == b.act(HELLO)[0].completion_ids
    assert a.score(HELLO, [["x"]])[0][0].logprobs != c.score(HELLO, [["x"]])[0][0].logprobs


def test_any_local_causal_lm_loads_by_path_with_its_chat_template(tmp_path):
    tiny = load_tiny(3)
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    loaded = load_hf(str(tmp_path))
    assert loaded.encode([HELLO[0].messages]) == tiny.encode([HELLO[0].messages])
    assert loaded.act(HELLO)[0].completion_ids == tiny.act(HELLO)[0].completion_ids
    assert make_player(f"hf:{tmp_path}", "kuhn_poker") is model(f"hf:{tmp_path}")  # loaded once, shared


def test_smollm2_loads_from_the_wheel_through_the_cache(smollm2):
    assert smollm2.name == "smollm2-135m"
    assert sum(p.numel() for p in smollm2.model.parameters()) == 134_515_008  # DESIGN.md: 134.5 M
    assert "<|im_start|>assistant" in smollm2.tokenizer.decode(smollm2.encode([HELLO[0].messages])[0])


def test_unknown_players_list_the_choices():
    with pytest.raises(ValueError, match="minimax"):
        make_player("alphago", "tictactoe")
    assert player_names("kuhn_poker")[:4] == ["tiny", "smollm2-135m", "hf:<path>", "human"]
