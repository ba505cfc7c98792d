"""Orchestration graph specs: the built-in topologies, and one-line errors for specs that cannot run."""

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from roles.graph import GraphSpec, builtin

SOLVE = {"brief": "solve"}
WRITE = {"brief": "write", "output": "task"}


def error_of(spec: dict) -> str:
    with pytest.raises(ValidationError) as err:
        GraphSpec.model_validate(spec)
    (first,) = err.value.errors()
    return first["msg"]


@pytest.mark.parametrize(
    ("name", "order", "scored", "loops"),
    [
        ("solo", ["executor"], ["executor"], {}),
        ("malt", ["generator", "verifier", "refiner"], ["refiner"], {}),
        ("agentflow", ["planner", "executor", "verifier", "generator"], ["generator"], {("verifier", "planner"): 2}),
        ("debate", ["debater", "judge"], ["judge"], {("debater", "debater"): 1}),
        ("agent0", ["proposer", "executor"], ["executor"], {}),
        ("task_forge", ["proposer", "executor", "verifier", "reviser", "teacher", "retrier"], ["reviser", "retrier"], {}),
    ],
)
def test_each_builtin_has_its_anchors_turn_structure(name, order, scored, loops):
    spec = builtin(name)
    assert list(nx.topological_sort(spec.forward())) == order
    assert spec.scored() == scored
    graph = spec.graph()
    assert {(u, v): d["rounds"] for u, v, d in graph.edges(data=True) if d["rounds"]} == loops


def test_malts_refiner_sees_the_question_answer_and_critique():
    graph = builtin("malt").graph()
    assert set(graph.predecessors("refiner")) == {"generator", "verifier"}
    assert graph.nodes["verifier"]["output"] == "text"


def test_agentflow_loops_back_to_the_planner_only_on_a_rejection():
    graph = builtin("agentflow").graph()
    assert graph.edges["verifier", "planner"]["when"] == "rejected"
    assert graph.edges["verifier", "generator"]["when"] == "always"


def test_debate_seats_three_debaters():
    assert builtin("debate").nodes["debater"].repeats == 3


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (
            {"nodes": {"a": SOLVE, "b": SOLVE}, "edges": [{"source": "a", "target": "c"}]},
            "edges[0]: a -> c: no node 'c' (nodes: a, b)",
        ),
        (
            {"nodes": {"a": SOLVE, "b": SOLVE, "c": SOLVE}, "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}, {"source": "c", "target": "b"}]},
            "the loop b -> c -> b has no cap: give one of its edges rounds = N",
        ),
        (
            {"nodes": {"a": SOLVE, "b": SOLVE}, "edges": [{"source": "a", "target": "b", "rounds": 2}]},
            "edges[0]: a -> b closes no loop, so rounds caps nothing",
        ),
        (
            {"nodes": {"a": SOLVE, "b": SOLVE, "c": {"brief": "talk", "output": "text"}}, "edges": [{"source": "a", "target": "b"}, {"source": "c", "target": "c", "rounds": 1}]},
            "node 'c' leads to no scored node (b): nothing it writes is used",
        ),
        (
            {"nodes": {"a": SOLVE, "b": SOLVE}, "edges": [{"source": "a", "target": "b", "when": "rejected"}]},
            "edges[0]: when = 'rejected' needs 'a' to have output = 'verdict'",
        ),
        (
            {"nodes": {"a": {"brief": "plan", "output": "text"}}},
            "no node is scored: mark one scored = true, or end the graph on an answering node",
        ),
        (
            {"nodes": {"a": {"brief": "judge", "output": "verdict", "scored": True}}},
            "node 'a' is scored but writes verdict, not an answer",
        ),
        (
            {"nodes": {"a": SOLVE, "b": SOLVE}, "edges": [{"source": "a", "target": "b"}, {"source": "a", "target": "b"}]},
            "edges[1]: a -> b is listed twice",
        ),
        ({"nodes": {"a": {"brief": "x", "repeat": 2}}}, "Extra inputs are not permitted"),
        (
            {"nodes": {"w": WRITE, "v": WRITE, "a": SOLVE}, "edges": [{"source": "w", "target": "a"}, {"source": "v", "target": "a"}]},
            "nodes w, v all write the task: a match has one",
        ),
        (
            {"nodes": {"w": WRITE, "a": SOLVE}, "edges": [{"source": "w", "target": "a"}, {"source": "a", "target": "w", "rounds": 1}]},
            "edges[1]: a -> w: the task's writer speaks first; nothing comes into it",
        ),
        (
            {"nodes": {"w": WRITE | {"repeats": 2}, "a": SOLVE}, "edges": [{"source": "w", "target": "a"}]},
            "node 'w' writes the task: one copy, not repeats = 2",
        ),
        (
            {"nodes": {"a": SOLVE, "b": SOLVE | {"seat": "c"}}, "edges": [{"source": "a", "target": "b"}]},
            "nodes.b.seat: 'c' is not a node with a seat of its own (nodes: a, b)",
        ),
        (
            {"nodes": {"a": SOLVE | {"repeats": 2}, "b": SOLVE | {"seat": "a"}}, "edges": [{"source": "a", "target": "b"}]},
            "nodes.b.seat: 'a' has 2 copies and 'b' 1; copy i plays copy i",
        ),
        (
            {"nodes": {"w": WRITE, "b": SOLVE | {"seat": "w"}}, "edges": [{"source": "w", "target": "b"}]},
            "nodes.b.seat: the task's writer 'w' plays only itself",
        ),
        (
            {"nodes": {"w": WRITE, "a": SOLVE}, "edges": [{"source": "w", "target": "a", "when": "wrong"}]},
            "edges[0]: when = 'wrong' needs 'w' to have output = 'answer'",
        ),
    ],
)  # fmt: skip
def test_a_spec_that_cannot_run_is_one_line_naming_the_culprit(spec, said):
    message = error_of(spec)
    assert said in message and "\n" not in message


def test_an_unknown_builtin_lists_the_known_ones():
    with pytest.raises(ValueError, match="no built-in graph 'star' \\(built-in: solo, malt, agentflow, debate, agent0, task_forge\\)"):
        builtin("star")


@st.composite
def chains_with_back_edges(draw):
    """A chain of n nodes and back edges (later -> earlier, or a self-loop), each capped or not."""
    n = draw(st.integers(1, 6))
    names = [f"n{i}" for i in range(n)]
    edges = [{"source": a, "target": b} for a, b in zip(names, names[1:])]
    backs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.booleans()), max_size=4, unique_by=lambda b: b[:2]))
    for later, earlier, capped in backs:
        if earlier <= later:
            edges.append({"source": names[later], "target": names[earlier], **({"rounds": 1} if capped else {})})
    return {"nodes": {name: SOLVE for name in names}, "edges": edges}, all("rounds" in e for e in edges[n - 1 :])


@given(chains_with_back_edges())
def test_a_chain_is_valid_exactly_when_every_back_edge_is_capped(case):
    spec, all_capped = case
    if all_capped:
        built = GraphSpec.model_validate(spec)
        assert nx.is_directed_acyclic_graph(built.forward()) and len(built.graph()) == len(spec["nodes"])
    else:
        assert "has no cap" in error_of(spec)

