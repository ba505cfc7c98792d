"""What each package costs to import: the game rules and the analysis of run directories load
without the training stack, so a script, a notebook or `coevo games` starts at once."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
HEAVY = ("torch", "transformers", "marl", "sklearn", "ray")


def heavy_modules_after(imports: list[str]) -> list[str]:
    """The HEAVY top-level packages a fresh interpreter holds after importing ``imports``."""
    code = (
        f"import importlib, json, sys\nfor m in {imports!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout)


def test_the_games_and_the_roles_prompts_and_parsers_load_without_the_training_stack_or_scikit_learn():
    assert heavy_modules_after(["games", "games.task_forge.rules", "games.task_forge.curricula", "roles", "roles.formats"]) == []


def test_no_analysis_module_imports_torch_or_the_training_code():
    modules = sorted(f"analysis.{p.stem}" for p in (ROOT / "analysis").glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 7
    assert not {"torch", "transformers", "marl"} & set(heavy_modules_after(modules))
