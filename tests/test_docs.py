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
MANUAL = sorted((README.parent / "docs").glob("*.md"))  # one page per area; docs/research/ is notes, not the manual
GUIDE = [README, *MANUAL]


@pytest.mark.parametrize("module", [games, populations.tournament, marl.rollout, marl.hf], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("page", GUIDE, ids=lambda p: p.name)
def test_readme_and_manual_examples(page):
    assert doctest.testfile(str(page), module_relative=False).failed == 0


def test_the_guide_has_examples_to_run():
    assert sum(doctest.testfile(str(page), module_relative=False).attempted for page in GUIDE) > 0


def test_readme_stays_a_guide_that_links_every_manual_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300, "the README is a guide: move the detail to a page of docs/"
    unlinked = [page.name for page in MANUAL if f"](docs/{page.name}" not in text]
    assert MANUAL and not unlinked, f"docs pages the README does not link: {unlinked}"


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


def quoted_benchmarks(page: Path) -> set[str]:
    return set(re.findall(r"\.venv/bin/python benchmarks/(\w+\.py)", page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", GUIDE, ids=lambda p: p.name)
def test_guide_commands_run_from_the_venv_and_make_bench_runs_every_benchmark_they_quote(page):
    bare_python = [line for line in page.read_text(encoding="utf-8").splitlines()
                   if re.search(r"(?<![/\w])python3? (?!-m pip)\S+\.py", line)]
    assert not bare_python, f"outside the venv these fail with ModuleNotFoundError: {bare_python}"
    make = subprocess.run(["make", "-n", "bench"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    benched = set(re.findall(r"(\w+\.py)", make.split("for b in", 1)[1]))
    quoted = quoted_benchmarks(page)
    assert quoted <= benched, f"quoted in {page.name} but not run by make bench: {quoted - benched}"


def test_the_guide_quotes_benchmarks():
    assert set().union(*map(quoted_benchmarks, GUIDE))
