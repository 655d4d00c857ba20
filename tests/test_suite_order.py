"""The suite's own schedule (``tests/conftest.py``): pytest-xdist's groups, longest first."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import GROUP_SECONDS, LEAGUE_GROUP, xdist_group

TESTS = Path(__file__).resolve().parent


def test_listed_groups_exist():
    """A renamed or removed test module must leave GROUP_SECONDS with it."""
    modules = {path.stem for path in TESTS.glob("test_*.py")}
    assert set(GROUP_SECONDS) - {LEAGUE_GROUP} <= modules


def test_every_test_has_a_group_and_the_groups_run_longest_first(request):
    items = request.session.items  # this session's tests, in the order they were handed out
    seconds = [GROUP_SECONDS.get(xdist_group(item), 0) for item in items]
    assert seconds == sorted(seconds, reverse=True)
    listed = [xdist_group(item) for item in items if xdist_group(item) in GROUP_SECONDS]
    assert listed == sorted(listed, key=lambda group: -GROUP_SECONDS[group])
    # each listed group's tests are contiguous, so a worker gets the group in one piece
    runs = [g for i, g in enumerate(listed) if i == 0 or listed[i - 1] != g]
    assert len(runs) == len(set(runs))


def test_xdist_keeps_this_order(request):
    # pytest-xdist's default sorts the groups by their number of tests; conftest turns it off.
    assert getattr(request.config.option, "loadscopereorder", False) is False
