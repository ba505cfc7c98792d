"""What players wrote reaches the terminal as visible text, never as terminal commands."""

import doctest
import io
import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

import analysis.printable
from analysis.printable import printable
from coevo.transcript import TranscriptPrinter
from marl.episode import Episode, Turn
from marl.rollout import MatchSpec, SeatSpec
from marl.scripted import ScriptedPolicy


def unsafe(ch: str) -> bool:
    """What must never reach the terminal raw (the module's list, written out from Unicode's own categories)."""
    code = ord(ch)
    control = unicodedata.category(ch) == "Cc" and ch not in "\n\t"  # C0, DEL and C1
    bidi = 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069  # embeddings, overrides, isolates
    return control or bidi or unicodedata.category(ch) == "Cs"  # Cs: surrogates


HOSTILE = "bet\x1b[2J\x1b]0;owned\x07\r\x85\x9b31m\u202eevil\u2066x\u2069\ud800\x00"


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=[])))
def test_nothing_unsafe_gets_through_and_the_result_always_prints(text):
    out = printable(text)
    assert not any(unsafe(ch) for ch in out)
    out.encode("utf-8")  # a lone surrogate would raise here, as print does


@given(st.text().filter(lambda t: not any(unsafe(ch) for ch in t)))
def test_printable_text_passes_unchanged(text):
    assert printable(text) == text


def test_each_unsafe_character_shows_as_its_escape():
    assert printable(HOSTILE) == "bet\\x1b[2J\\x1b]0;owned\\x07\\r\\x85\\x9b31m\\u202eevil\\u2066x\\u2069\\ud800\\x00"
    assert printable("שלום مرحبا 你好 é\tok\n") == "שלום مرحبا 你好 é\tok\n"  # right-to-left scripts are text, not overrides


def test_the_docstring_examples():
    assert doctest.testmod(analysis.printable).failed == 0


def hostile_episode(said: str = HOSTILE) -> tuple[MatchSpec, Episode]:
    seat = SeatSpec(ScriptedPolicy("random", lambda: None), f"model{said[3:8]}")
    spec = MatchSpec("kuhn_poker", 0, {"player_0": seat, "player_1": seat})
    turn = Turn(
        index=0, seat="player_0", role="player_0", member=seat.member, observation=f"rules\n\nthey said: {said}",
        prompt_ids=[], completion_ids=[], logprobs=[], text=said, move=None, valid=False, reason=f"no move in {said}",
    )  # fmt: skip
    episode = Episode(
        match_id="m", game="kuhn_poker", seed=0, members={"player_0": seat.member, "player_1": seat.member}, turns=[turn],
        rewards={"player_0": -1.0, "player_1": 1.0}, forfeited_by="player_0",
    )  # fmt: skip
    return spec, episode


def transcript(show_prompt: bool, colour: bool) -> str:
    spec, episode = hostile_episode()
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=200, force_terminal=colour), show_prompt)
    printer.start(spec, f"rules {HOSTILE}")
    printer.turn(spec, episode.turns[0])
    printer.end(episode)
    return out.getvalue()


@pytest.mark.parametrize("show_prompt", [False, True])
def test_the_match_transcript_shows_control_characters_as_escapes(show_prompt):
    plain = transcript(show_prompt, colour=False)
    assert not any(unsafe(ch) for ch in plain)
    assert "they said: bet\\x1b[2J\\x1b]0;owned\\x07\\r\\x85\\x9b31m\\u202eevil" in plain and "\\ud800" in plain
    coloured = transcript(show_prompt, colour=True)  # rich writes ESC itself there, for its colours
    assert not any(unsafe(ch) for ch in coloured.replace("\x1b", ""))
    assert "\x1b[2J" not in coloured and "\x1b]0;" not in coloured  # the model's own sequences lost their ESC


def test_json_keeps_the_exact_text():
    exact = HOSTILE.replace("\ud800", "")  # JSON holds no lone surrogates (the rollout replaces them with U+FFFD)
    _, episode = hostile_episode(exact)
    assert json.loads(episode.model_dump_json())["turns"][0]["text"] == exact
