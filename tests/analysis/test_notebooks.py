"""The notebooks run end to end on real runs and sweeps, and are committed without outputs."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def execute(name: str, monkeypatch, **env: Path) -> nbformat.NotebookNode:
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))  # the kernel inherits our environment
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS.parent)}}).execute()
    return notebook


def images(notebook: nbformat.NotebookNode) -> int:
    return sum("image/png" in out.get("data", {}) for cell in notebook.cells for out in cell.get("outputs", []))


@pytest.mark.parametrize("name", ["explore_run.ipynb", "compare_sweep.ipynb"])
def test_notebooks_are_committed_with_outputs_cleared(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.parametrize("fixture", ["kuhn_run", "forge_run"])
def test_explore_run_executes_and_draws(fixture, request, monkeypatch):
    run = request.getfixturevalue(fixture)
    notebook = execute("explore_run.ipynb", monkeypatch, COEVO_RUN=run)
    assert images(notebook) >= 3
    printed = "".join(out.get("text", "") for out in notebook.cells[1].outputs)
    assert "finished" in printed


def test_compare_sweep_executes_and_draws(sweep_dir, monkeypatch):
    notebook = execute("compare_sweep.ipynb", monkeypatch, COEVO_SWEEP=sweep_dir)
    assert images(notebook) >= 2
    printed = "".join(out.get("text", "") for out in notebook.cells[1].outputs)
    assert "4 runs, 4 with events" in printed and "population.matchmaker" in printed
