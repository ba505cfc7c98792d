"""How the packages import each other: one way down the layers, with no circle between modules;
and what each costs to import: the game rules and the analysis of run directories load without the
training stack, so a script, a notebook or `coevo games` starts at once."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).parents[1]
HEAVY = ("torch", "transformers", "marl", "sklearn", "ray")
# Bottom to top: each package imports only those before it (and itself). coevo composes the rest:
# the run config, the trainer, its roster, planners and evaluators, evolution, distillation, sweeps.
LAYERS = ("games", "roles", "marl", "populations", "analysis", "coevo")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    """Module -> each of our modules it imports, anywhere in its text: at the top, inside a
    function, or under ``TYPE_CHECKING`` (a circle hidden in a function is still a circle)."""
    modules = {module_name(p): p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")}
    graph = nx.DiGraph()
    for module, path in modules.items():
        graph.add_node(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per extra dot
                    base = ".".join([*package.split(".")[: package.count(".") + 2 - node.level], *filter(None, [base])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph.add_edge(module, target, line=node.lineno)
    return graph


def test_the_graph_sees_imports_at_the_top_in_functions_and_under_type_checking():
    graph = import_graph()
    assert graph.number_of_nodes() > 80
    assert graph.has_edge("coevo.train", "coevo.evaluators")  # top level
    assert graph.has_edge("coevo.cli", "coevo.distill")  # inside a function
    assert graph.has_edge("coevo.distill", "games.openspiel_env")  # under TYPE_CHECKING
    assert graph.has_edge("roles", "games")  # `import games`: the package itself


def test_every_import_runs_down_the_layers():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = [
        f"{a}:{line} imports {b}"
        for a, b, line in import_graph().edges(data="line")
        if rank[b.split(".")[0]] > rank[a.split(".")[0]]
    ]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    assert [" -> ".join(cycle) for cycle in nx.simple_cycles(import_graph())] == []


def test_the_games_load_without_the_roles_and_the_roles_register_the_graphs():
    code = "import games, sys; print('roles' in sys.modules, 'graph/malt' in games.list()); import roles; print('graph/malt' in games.list())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.split() == ["False", "False", "True"]


def heavy_modules_after(imports: list[str]) -> list[str]:
    """The HEAVY top-level packages a fresh interpreter holds after importing ``imports``."""
    code = (
        f"import importlib, json, sys\nfor m in {imports!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout)


def test_the_games_and_the_roles_prompts_and_parsers_load_without_the_training_stack_or_scikit_learn():
    assert heavy_modules_after(["games", "games.task_forge.rules", "games.task_forge.curricula", "roles", "games.formats"]) == []


def test_no_analysis_module_imports_torch_or_the_training_code():
    modules = sorted(f"analysis.{p.stem}" for p in (ROOT / "analysis").glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 7
    assert not {"torch", "transformers", "marl"} & set(heavy_modules_after(modules))
