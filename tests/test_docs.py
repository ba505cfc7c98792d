"""Docstring and README examples run as written."""

import doctest
import re
import subprocess
from pathlib import Path

import pytest

import games
import marl.hf
import marl.rollout
import populations.tournament

README = Path(__file__).parent.parent / "README.md"


@pytest.mark.parametrize("module", [games, populations.tournament, marl.rollout, marl.hf], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_readme_examples():
    result = doctest.testfile(str(README), module_relative=False)
    assert result.attempted > 0 and result.failed == 0


ROOT = README.parent
TOP_LEVEL = "docs|examples|benchmarks|games|roles|marl|populations|analysis|notebooks|coevo|tests"
REFERENCE = re.compile(rf"(?<![\w./-])((?:{TOP_LEVEL}|research)/[\w./-]*\w\.(?:md|py|toml|ipynb|png|json))")
NOTES = "docs/research/"  # notes on other repositories: only their references to each other are ours


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / n for n in names if n.endswith((".py", ".toml", ".md", ".ipynb")) or n == "Makefile"]


def test_no_dangling_references_to_files_of_the_repository():
    dangling = [
        f"{path.relative_to(ROOT)}: {ref}"
        for path in tracked_text_files()
        for ref in REFERENCE.findall(path.read_text(encoding="utf-8"))
        if not (ROOT / ref).exists() and (ref.startswith(NOTES) or not str(path.relative_to(ROOT)).startswith(NOTES))
    ]
    assert not dangling, dangling


def test_readme_commands_run_from_the_venv_and_make_bench_runs_every_benchmark_it_quotes():
    text = README.read_text(encoding="utf-8")
    bare_python = [line for line in text.splitlines() if re.search(r"(?<![/\w])python3? (?!-m pip)\S+\.py", line)]
    assert not bare_python, f"outside the venv these fail with ModuleNotFoundError: {bare_python}"
    quoted = {name for name in re.findall(r"\.venv/bin/python benchmarks/(\w+\.py)", text)}
    make = subprocess.run(["make", "-n", "bench"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    benched = set(re.findall(r"(\w+\.py)", make.split("for b in", 1)[1]))
    assert quoted and quoted <= benched, f"quoted in the README but not run by make bench: {quoted - benched}"
