"""The static-cache decoding loop plays what generate plays, syncs less, and says when it cannot run;
the operator counter counts what it promises."""

import pytest
import torch

from marl.decode import CHECK_EVERY, decode
from marl.models import load_tiny
from marl.opcount import count
from marl.policy import Request, Sampling

SHARED = "You are playing Kuhn poker against another player. Play to win. Answer in \\boxed{}. "  # a shared prefix


def requests():
    """Mixed settings in one batch: greedy, tempered, nucleus; different lengths; a shared start."""
    settings = [Sampling(0, 1, 20), Sampling(1.0, 1.0, 7), Sampling(0.7, 0.9, 20), Sampling(1.3, 1.0, 13)]
    return [Request(SHARED + f"Match {i}: your card is {'JQK'[i % 3]}." * (i + 1), s, seed=i) for i, s in enumerate(settings)]


def test_the_static_loop_draws_generates_tokens_and_logprobs(tiny):
    played = {}
    for loop in ("generate", "static"):
        tiny.decode = loop
        played[loop] = tiny.act(requests())
    tiny.decode = "auto"
    for g, s in zip(played["generate"], played["static"]):
        assert s.completion_ids == g.completion_ids and s.finish_reason == g.finish_reason
        assert s.logprobs == pytest.approx(g.logprobs, abs=1e-5)


def test_auto_is_generate_on_the_cpu(tiny):
    assert tiny.decoding() == "generate"


def test_the_loop_stops_at_the_first_check_after_every_row_ended(tiny):
    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    mask = torch.ones_like(ids)
    eos = min(tiny.eos_ids)
    draws = []

    def always_eos(logits):
        draws.append(logits.shape)
        return torch.full((logits.shape[0], 1), eos)

    with torch.inference_mode():
        tokens = decode(tiny.model, tiny.model.config, ids, mask, None, 5 * CHECK_EVERY, always_eos, [eos], {})
    assert tokens.shape == (2, CHECK_EVERY) and len(draws) == CHECK_EVERY
    assert (tokens == eos).all()


def test_a_model_it_cannot_decode_is_named():
    policy = load_tiny()
    policy.model.config._attn_implementation = "eager"
    policy.decode = "static"
    with pytest.raises(ValueError, match="static decoding needs SDPA attention, not eager; set rollout.decode"):
        policy.act(requests()[:1])


def test_the_static_loop_syncs_once_per_check_and_generate_once_per_step(tiny):
    batch = [Request(SHARED + f"Match {i}.", Sampling(1.0, 1.0, 3 * CHECK_EVERY + 2), seed=i) for i in range(3)]
    per_step = {}
    for loop in ("generate", "static"):
        tiny.decode = loop
        per_step[loop] = count(lambda: tiny.act(batch), tiny.model)
    tiny.decode = "auto"
    static, generate = per_step["static"], per_step["generate"]
    assert sum(static.sync_names().values()) == 3  # one look at the finished flags every CHECK_EVERY steps
    assert generate.per_step()["syncs"] >= 1.0
    assert static.per_step()["ops"] < generate.per_step()["ops"]


def test_compiled_steps_play_as_the_plain_loop():
    policy = load_tiny()
    policy.decode = "static"
    plain = policy.act(requests())
    policy.compile = True
    compiled = policy.act(requests())
    assert [r.completion_ids for r in compiled] == [r.completion_ids for r in plain]
    for c, p in zip(compiled, plain):
        assert c.logprobs == pytest.approx(p.logprobs, abs=1e-4)


def test_the_counter_names_each_kind_of_host_sync(tiny):
    x = torch.arange(6.0)

    def syncing():
        x[0].item()
        bool(x[1] > 0)
        x.tolist()
        torch.tensor([1, 2])  # host data: a host-to-device copy on a GPU
        x[x > 2]  # boolean indexing: its size depends on values
        x.nonzero()
        torch.repeat_interleave(torch.tensor([1, 2]))

    with torch.inference_mode():  # as the engine runs (outside it, item and bool both dispatch _local_scalar_dense)
        tally = count(syncing, tiny.model)
    assert tally.before.syncs == {
        "aten.item": 1, "aten.is_nonzero": 1, "Tensor.tolist": 1, "aten.lift_fresh": 2, "aten.index": 1, "aten.nonzero": 1,
        "aten.repeat_interleave": 1,
    }  # fmt: skip
    assert not count(lambda: (x * 2).cumsum(0).softmax(0), tiny.model).before.syncs


def test_the_counter_splits_a_call_at_its_forward_passes(tiny):
    tally = count(lambda: tiny.act([Request("Hi", Sampling(0, 1, 6))]), tiny.model)
    assert [s.new_tokens for s in tally.steps] == [len(tiny.encode(["Hi"])[0])] + [1] * 5
    assert len(tally.decoding()) == 4  # the last step's wrap-up is not a step's work
