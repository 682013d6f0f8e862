"""Trailers: format_message / parse_trailers round-trip and agree with git's own parser."""

from __future__ import annotations

import subprocess

import pytest

from git_hermit.gitio import TRAILER_KEYS, format_message, normalise_trailer_value, parse_trailers


def git_trailers(message: str) -> list[tuple[str, str]]:
    out = subprocess.run(["git", "interpret-trailers", "--parse"], input=message, capture_output=True,
                         text=True, check=True).stdout
    return [tuple(part.strip() for part in line.split(":", 1)) for line in out.splitlines()]


def test_round_trip_with_multiline_values():
    trailers = [("Hermit-Run", "officeqa"), ("Hermit-Step", "3"), ("Hermit-Change", "c1"),
                ("Hermit-Risk", "may slow down\n  indented detail\nlast line"), ("Hermit-Predicts-Fix", "t1")]
    message = format_message("hermit(ahe) step 3: c1: tighten prompt", "Why:\n\nbecause.", trailers)
    assert message.startswith("hermit(ahe) step 3: c1: tighten prompt\n\nWhy:\n\nbecause.\n\nHermit-Run: officeqa\n")
    assert message.endswith("\n")
    assert parse_trailers(message) == trailers


def test_git_parses_the_same_block():
    message = format_message("s", "body", [("Hermit-Run", "r"), ("Hermit-Risk", "a\nb")])
    # git unfolds continuation lines with a space; keys and order agree.
    assert git_trailers(message) == [("Hermit-Run", "r"), ("Hermit-Risk", "a b")]


def test_values_are_normalised_so_they_round_trip():
    raw = "  first  \n\n second\t\n\n"
    assert normalise_trailer_value(raw) == "first\n second"
    assert parse_trailers(format_message("s", trailers=[("Hermit-Risk", raw)])) == [("Hermit-Risk", "first\n second")]


def test_parse_follows_gits_rules():
    assert parse_trailers("subject only\n") == []
    assert parse_trailers("Key: subject is never a trailer\n") == []
    assert parse_trailers("s\n\nbody\n\nnot: a\nplain line\n") == []  # every line must be a trailer
    assert parse_trailers("s\n\nKey: v\n\nbody after\n") == []  # only the last paragraph counts
    assert parse_trailers("s\n\nSigned-off-by: A <a@b>\nHermit-Run: r\n\n") == [
        ("Signed-off-by", "A <a@b>"), ("Hermit-Run", "r")]
    message = "s\n\nbody\n\nHermit-Verdict: HARMFUL\n\tcontinued\n"
    assert parse_trailers(message) == [("Hermit-Verdict", "HARMFUL\ncontinued")]
    assert [key for key, _ in git_trailers(message)] == ["Hermit-Verdict"]


def test_bad_input():
    with pytest.raises(ValueError):
        format_message("s", trailers=[("Bad Key", "v")])
    with pytest.raises(ValueError):
        format_message("   ")
    assert format_message("s") == "s\n"
    assert len(TRAILER_KEYS) == 10 and all(key.startswith("Hermit-") for key in TRAILER_KEYS)
