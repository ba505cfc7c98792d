"""Who descends from whom: members, their frozen snapshots, and every change between them.

The lineage is a networkx ``DiGraph``. A node is a frozen snapshot (``m0@10``: member ``m0`` as it
was after iteration 10) or a live member's current head (``m0``). Each edge runs from parent to
child and says what changed: a snapshot continues its member's line
(``m0@0 → m0@10 → m0@20``), a PBT exploit starts a new line from another member's snapshot
(``m0@30 → m3`` with ``change="pbt: copied m0, lr ×1.2"``), a league reset goes back to the
initial snapshot. It is saved with the run as node-link JSON (exact round trip) and exported as
GraphML for Gephi, yEd or Cytoscape; GraphML holds only scalars, so dict attributes are written
as JSON strings there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import networkx as nx


class Lineage:
    def __init__(self) -> None:
        self.graph = nx.DiGraph()

    def add(self, node: str, parent: str | None = None, change: str = "", iteration: int = 0, **attrs: Any) -> None:
        """A new node, and the edge from its parent saying what changed."""
        if node in self.graph:
            raise ValueError(f"lineage already has {node!r}")
        self.graph.add_node(node, iteration=iteration, **attrs)
        if parent is not None:
            self.graph.add_edge(parent, node, change=change, iteration=iteration)

    def reparent(self, node: str, parent: str, change: str, iteration: int) -> None:
        """A live member's head now descends from ``parent`` (its old line was snapshotted first)."""
        self.graph.remove_edges_from(list(self.graph.in_edges(node)))
        self.graph.add_edge(parent, node, change=change, iteration=iteration)

    def parent(self, node: str) -> str | None:
        parents = list(self.graph.predecessors(node))
        return parents[0] if parents else None

    def change(self, parent: str, child: str) -> str:
        return self.graph.edges[parent, child]["change"]

    def ancestors(self, node: str) -> list[str]:
        """Parent, grandparent, … back to a root."""
        line, here = [], self.parent(node)
        while here is not None:
            line.append(here)
            here = self.parent(here)
        return line

    def state_dict(self) -> dict:
        return nx.node_link_data(self.graph, edges="edges")

    def load_state_dict(self, state: dict) -> None:
        self.graph = nx.node_link_graph(state, directed=True, edges="edges")

    def write_graphml(self, path: str | Path | IO[bytes]) -> None:
        flat = nx.DiGraph()
        for node, attrs in self.graph.nodes(data=True):
            flat.add_node(node, **{k: _scalar(v) for k, v in attrs.items()})
        for a, b, attrs in self.graph.edges(data=True):
            flat.add_edge(a, b, **{k: _scalar(v) for k, v in attrs.items()})
        nx.write_graphml(flat, path)


def _scalar(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) else json.dumps(value, sort_keys=True)
