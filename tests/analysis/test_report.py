"""``coevo report``: each page opens in headless Chromium from disk with no errors, shows every figure
and the sampled turns, reaches for nothing on the network, and shows model text as text.

Chromium and its driver come from Debian (``make system-deps``); selenium is given the driver's path
so it never tries to download one.
"""

import contextlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from typer.testing import CliRunner

from analysis.load import Run, load_run, load_sweep
from analysis.plots import run_figures, sweep_figures
from analysis.report import sample_matches, write_report
from coevo.cli import app

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
WIDTH = 1200
PAYLOAD = '<script>document.title = "pwned"</script><b>bold</b> & <img src="x">'


@pytest.fixture(scope="module")
def browser():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: `make system-deps` installs chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={WIDTH},1000")
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    yield driver
    driver.quit()


def show(browser, index: Path) -> list[dict]:
    """Open the page from disk; return the browser's SEVERE log entries (console errors, failed loads)."""
    browser.get_log("browser")  # drain what earlier pages left
    browser.get(index.as_uri())
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def check_page(browser, index: Path, figures: int, tmp_path: Path) -> None:
    """What every report must do in a browser: load cleanly, draw each figure, take a real screenshot."""
    html = index.read_text(encoding="utf-8")
    assert not re.search(r"https?://", html), "the report must not reference the network"
    links = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert all(link.startswith(("data:", "#")) for link in links), [link[:40] for link in links]
    assert show(browser, index) == []
    images = browser.execute_script("return Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
    assert len(images) == figures >= 1
    assert all(complete and width > 0 for complete, width in images), images
    assert {p.name for p in index.parent.glob("*.png")} == {f"{p.stem}.png" for p in index.parent.glob("*.svg")}
    assert len(list(index.parent.glob("*.png"))) == figures
    shot = tmp_path / "page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 0
    with Image.open(shot) as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] >= WIDTH * 0.9 and image.size[1] > 0


def as_parsed(text: str) -> str:
    """Text as an HTML parser hands it to the DOM: line ends normalised, NUL replaced."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


def check_transcripts(browser, run: Run, shown: int) -> None:
    """Every turn of the sampled matches is in the page, in order, with its text, and invalid ones marked."""
    sampled = sample_matches(run.episodes, shown)
    assert len(sampled) == min(shown, (run.episodes["iteration"] == run.episodes["iteration"].max()).sum())
    turns = pd.concat(
        [
            run.turns[(run.turns["iteration"] == m.iteration) & (run.turns["match_id"] == m.match_id)]
            for m in sampled.itertuples()
        ]
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.turn")
    assert len(rows) == len(turns) > 0
    for row, turn in zip(rows, turns.itertuples()):
        content = row.get_attribute("textContent")
        assert as_parsed(turn.text) in content and turn.seat in content and turn.member in content
        assert ("invalid" in row.get_attribute("class").split()) == (not turn.valid)
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.match")) == len(sampled)
    page = browser.find_element(By.TAG_NAME, "body").get_attribute("textContent")
    for match in sampled.itertuples():
        assert match.match_id in page
    if "outcome.p_hat" in sampled:  # task forge: the outcome of every shown match
        assert len(browser.find_elements(By.XPATH, "//h4[text()='Outcome']")) == len(sampled)


@pytest.mark.parametrize(
    "fixture, status",
    [
        ("kuhn_run", "3 done of 3 planned"),
        ("population_run", "3 done of 3 planned"),
        ("forge_run", "3 done of 3 planned"),
        ("tictactoe_run", "2 done of 2 planned"),
        ("killed_run", "not finished"),
    ],
)
def test_a_run_report_opens_cleanly_with_its_figures_and_transcripts(request, browser, tmp_path, fixture, status):
    run_dir = request.getfixturevalue(fixture)
    killed = fixture == "killed_run"
    with pytest.warns(UserWarning, match="not complete JSON") if killed else contextlib.nullcontext():
        index = write_report(run_dir, transcripts=3)
        run = load_run(run_dir)
    assert index == run_dir / "report" / "index.html"
    check_page(browser, index, len(run_figures(run)), tmp_path)
    header = browser.find_element(By.TAG_NAME, "header").text
    assert status in header and ("not finished" in header) == killed
    check_transcripts(browser, run, 3)


def test_the_cli_writes_the_same_report_twice(kuhn_run, browser):
    result = CliRunner().invoke(app, ["report", str(kuhn_run), "--transcripts", "2"])
    assert result.exit_code == 0, result.output
    index = kuhn_run / "report" / "index.html"
    assert "report:" in result.output and index.exists()
    first = index.read_text(encoding="utf-8")
    assert show(browser, index) == []
    check_transcripts(browser, load_run(kuhn_run), 2)
    assert write_report(kuhn_run, transcripts=2).read_text(encoding="utf-8") == first  # sampled deterministically


def test_a_sweep_report_shows_the_results_table(sweep_dir, browser, tmp_path):
    index = write_report(sweep_dir)
    sweep = load_sweep(sweep_dir)
    check_page(browser, index, len(sweep_figures(sweep)), tmp_path)
    assert browser.find_elements(By.CSS_SELECTOR, "tr.turn") == []
    table = browser.find_element(By.CSS_SELECTOR, "#results table")
    headers = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers[: len(sweep.settings) + 2] == ["run", *sweep.settings, "status"]
    assert "kuhn/population_exploitability" in headers
    assert len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) == len(sweep.results)
    body = table.get_attribute("textContent")
    assert all(run in body for run in sweep.results["run"])


def test_model_text_is_shown_as_text_never_run_and_invalid_turns_are_marked(kuhn_run, copy_of, browser, tmp_path):
    run_dir = copy_of(kuhn_run)
    last = max((run_dir / "episodes").glob("iter_*.jsonl"))
    episodes = [json.loads(line) for line in last.read_text().splitlines()]
    for episode in episodes:
        episode["turns"][0].update(text=PAYLOAD, observation=PAYLOAD, move=PAYLOAD, valid=False, reason=PAYLOAD)
    last.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    index = write_report(run_dir, transcripts=3)
    html = index.read_text(encoding="utf-8")
    assert PAYLOAD not in html and "&lt;script&gt;" in html
    check_page(browser, index, len(run_figures(load_run(run_dir))), tmp_path)
    assert browser.execute_script("return document.scripts.length") == 0
    assert "pwned" not in browser.title
    assert browser.find_elements(By.XPATH, "//b[text()='bold'] | //td//img") == []
    first = browser.find_elements(By.CSS_SELECTOR, "tr.turn")[0].get_attribute("textContent")
    assert first.count(PAYLOAD) == 4  # what the seat saw, wrote and moved, and why it was invalid: verbatim, as text
    check_transcripts(browser, load_run(run_dir), 3)  # the invalid first turns are marked so


@pytest.mark.parametrize("name", ["", "missing"])
def test_a_folder_that_is_neither_run_nor_sweep_is_a_one_line_error(tmp_path, name):
    result = CliRunner().invoke(app, ["report", str(tmp_path / name)])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "neither a run directory" in result.output


def test_transcripts_are_sampled_from_the_last_iteration_an_invalid_move_first():
    episodes = pd.DataFrame({
        "iteration": [1] * 2 + [2] * 6,
        "match_id": ["a", "b", "c", "d", "e", "f", "g", "h"],
        "game": ["kuhn_poker"] * 2 + ["kuhn_poker"] * 5 + ["tictactoe"],
        "invalid_turns": [3, 0, 0, 0, 0, 0, 1, 0],
    })  # fmt: skip
    picked = sample_matches(episodes, 3)
    assert list(picked["match_id"]) == list(sample_matches(episodes, 3)["match_id"])  # deterministic
    assert (picked["iteration"] == 2).all() and picked["match_id"].is_unique
    assert picked["match_id"].iloc[0] == "g"  # the one match with an invalid move
    assert "h" in set(picked["match_id"])  # the only tic-tac-toe match: one of each game
    assert len(sample_matches(episodes, 10)) == 6 and sample_matches(episodes, 0).empty
    assert sample_matches(episodes.head(0), 3).empty


def test_report_metric_names_the_curves_metric_and_an_unknown_one_is_one_line(tictactoe_run, copy_of):
    folder = copy_of(tictactoe_run)
    done = CliRunner().invoke(app, ["report", str(folder), "--metric", "policy/entropy", "--transcripts", "0"])
    assert done.exit_code == 0, done.output
    assert "policy/entropy" in (folder / "report" / "index.html").read_text()
    bad = CliRunner().invoke(app, ["report", str(folder), "--metric", "kuhn/exploitability"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1 and "--metric" in bad.output
