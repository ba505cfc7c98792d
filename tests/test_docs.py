"""Docstring and README examples run as written."""

import doctest
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
