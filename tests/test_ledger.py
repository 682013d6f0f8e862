"""Ledger: pricing, totals by role/step, unknown cost with a login, tokens/trial, Succ/Mtok."""

from __future__ import annotations

import threading

import pytest

from git_hermit.accounting.ledger import Ledger, LedgerEntry, Price, load_prices, price_usage, sum_usage
from git_hermit.errors import ConfigError
from git_hermit.model.rollout import RolloutResult, Usage

PRICES = load_prices({"gpt-5.6-luna": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
                      "grader": {"input": 2.0, "output": 8.0}})


def test_load_prices():
    assert PRICES["gpt-5.6-luna"] == Price(1.25, 0.125, 10.0)
    assert PRICES["grader"].cached_input == 2.0           # defaults to the input price
    with pytest.raises(ConfigError, match="needs input and output"):
        load_prices({"m": {"input": 1.0}})
    with pytest.raises(ConfigError, match="unknown key"):
        load_prices({"m": {"input": 1.0, "output": 2.0, "reasoning": 3.0}})
    with pytest.raises(ConfigError, match="numbers"):
        load_prices({"m": {"input": "cheap", "output": 2.0}})


def test_price_usage():
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000,
                  reasoning_tokens=60_000)
    priced = price_usage(usage, PRICES["gpt-5.6-luna"])
    # 600k uncached at 1.25 + 400k cached at 0.125 + 100k output (reasoning included) at 10
    assert priced.cost_usd == pytest.approx(0.75 + 0.05 + 1.0)
    assert priced.input_tokens == usage.input_tokens
    assert price_usage(priced, None).cost_usd is None


def rollout(task: str, attempt: int, outcome: str, tokens_in: int, tokens_out: int,
            judge_in: int = 0) -> RolloutResult:
    return RolloutResult(task, attempt, outcome, usage=Usage(tokens_in, 0, tokens_out),
                         judge_usage=Usage(judge_in, 0, judge_in // 10))


def test_totals_by_role_and_step():
    ledger = Ledger(PRICES)
    ledger.add_rollout(rollout("a", 1, "pass", 1000, 100, judge_in=500), model="gpt-5.6-luna",
                       judge_model="grader", step=1)
    ledger.add_rollout(rollout("a", 2, "fail", 3000, 300), model="gpt-5.6-luna", step=1)
    ledger.record("debugger", "debugger/a", "gpt-5.6-luna", Usage(2000, 1000, 200), step=1)
    ledger.record("evolve", "evolve", "gpt-5.6-luna", Usage(5000, 0, 500), step=2)
    by_role = ledger.totals()
    assert list(by_role) == ["acting", "judge", "debugger", "evolve"]
    assert (by_role["acting"].input_tokens, by_role["acting"].output_tokens) == (4000, 400)
    assert by_role["acting"].cost_usd == pytest.approx((4000 * 1.25 + 400 * 10) / 1e6)
    assert by_role["judge"].cost_usd == pytest.approx((500 * 2.0 + 50 * 8.0) / 1e6)
    assert by_role["debugger"].cost_usd == pytest.approx((1000 * 1.25 + 1000 * 0.125 + 200 * 10) / 1e6)
    by_step = ledger.totals(by="step")
    assert by_step[2].input_tokens == 5000 and by_step[1].input_tokens == 6500
    assert ledger.total().cost_usd == pytest.approx(sum(u.cost_usd for u in by_role.values()))
    with pytest.raises(ValueError):
        ledger.totals(by="colour")


def test_login_model_has_unknown_cost_never_invented():
    ledger = Ledger(PRICES)
    ledger.add_rollout(rollout("a", 1, "pass", 1000, 100), model="gpt-5.6-luna")
    ledger.record("evolve", "evolve", "chatgpt-login-model", Usage(5000, 0, 500))
    assert ledger.totals()["evolve"].cost_usd is None
    assert ledger.totals()["acting"].cost_usd is not None
    assert ledger.total().cost_usd is None                   # a partial sum would be invented
    assert ledger.total().input_tokens == 6000
    assert any("cost unknown" in line for line in ledger.render())


def test_sum_usage_ignores_unpriced_empty_usage():
    assert sum_usage([Usage(10, 0, 1, cost_usd=0.5), Usage()]).cost_usd == 0.5
    assert sum_usage([]).cost_usd == 0.0


def test_usage_with_its_own_cost_is_kept():
    ledger = Ledger(PRICES)
    entry = ledger.record("acting", "a#1", "claude-login", Usage(100, 0, 10, cost_usd=0.42))
    assert entry.usage.cost_usd == 0.42


def test_tokens_per_trial_and_successes_per_mtok():
    ledger = Ledger(PRICES)
    ledger.add_rollout(rollout("a", 1, "pass", 900, 100), model="gpt-5.6-luna")
    ledger.add_rollout(rollout("a", 2, "fail", 2700, 300), model="gpt-5.6-luna")
    ledger.add_rollout(rollout("b", 1, "exception", 90_000, 0), model="gpt-5.6-luna")   # left out
    ledger.record("evolve", "evolve", "gpt-5.6-luna", Usage(10_000, 0, 0))               # not a trial
    assert ledger.tokens_per_trial() == 2000.0
    assert ledger.successes_per_mtok(0.5) == pytest.approx(0.5 * 1e6 / 2000)
    assert Ledger().tokens_per_trial() is None and Ledger().successes_per_mtok(1.0) is None


def test_round_trip_and_render():
    ledger = Ledger(PRICES)
    ledger.add_rollout(rollout("a", 1, "pass", 1500, 100, judge_in=100), model="gpt-5.6-luna",
                       judge_model="grader", step=3)
    data = ledger.to_dict()
    assert data["v"] == 1 and len(data["entries"]) == 2
    again = Ledger.from_dict(data, PRICES)
    assert again.entries == ledger.entries and again.to_dict() == data
    lines = ledger.render()
    assert lines[0].startswith("acting") and "1.6k tok" in lines[0] and "$" in lines[0]
    assert lines[-1].startswith("total")
    assert LedgerEntry.from_dict(data["entries"][0]).outcome == "pass"


def test_concurrent_adds_are_all_kept():
    ledger = Ledger(PRICES)

    def worker(index: int) -> None:
        for attempt in range(200):
            ledger.record("acting", f"t{index}#{attempt}", "gpt-5.6-luna", Usage(10, 0, 1), outcome="pass")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ledger.entries) == 800 and ledger.total().input_tokens == 8000


def test_a_backend_that_reports_no_tokens_shows_unknown_not_zero():
    from git_hermit.accounting.ledger import Ledger, Price, format_usage
    from git_hermit.model.rollout import Usage
    assert format_usage(Usage(cost_usd=0.0)) == "tokens unknown (not reported)  cost unknown"
    assert "$0.00" not in "\n".join(Ledger({"m": Price(1.0, 0.1, 2.0)}).render())
    measured = format_usage(Usage(1000, 0, 10, 0, 0.5))
    assert measured.startswith("1.0k tok") and measured.endswith("$0.50")


@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_ledger_written_an_entry_at_a_time_is_the_json_of_the_whole(count):
    """json_chunks (a step's ledger.json, streamed) gives byte for byte what json.dumps of the
    whole ledger gives, odd keys (quotes, newlines, non-ASCII) included."""
    import json
    ledger = Ledger()
    for i in range(count):
        ledger.record("acting" if i % 2 else "judge", f't{i}#1 "quoted"\nnext é', "model-x",
                      Usage(input_tokens=10 * i, output_tokens=i, cost_usd=None if i == 2 else 0.5 * i),
                      step=i, outcome="pass")
    assert "".join(ledger.json_chunks()) == json.dumps(ledger.to_dict(), indent=2) + "\n"
