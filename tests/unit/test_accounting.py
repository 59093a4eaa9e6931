import math

import pytest

from ppml.accounting import account_run
from ppml.history import PrivacyLedger
from ppml.privacy.events import GaussianEvent


def _ledger(*, certified, events=(), notes=(), paper_bound=None, delta=1e-5, seeds=1):
    led = PrivacyLedger(events=list(events), certified=certified, delta=delta, target_epsilon=None,
                        notes=list(notes), paper_bound=paper_bound)
    return {"runs": [led.to_dict() for _ in range(seeds)]}


def test_no_privacy_side_gives_no_entry():
    assert account_run("c", {"algorithm": "centralized"}, _ledger(certified=False)) is None
    assert account_run("c", {"algorithm": "centralized"}, {"runs": []}) is None


def test_fixed_noise_run_is_listed_without_epsilon():
    entry = account_run("a", {"algorithm": "admm_sharing", "sigma": 0.3},
                        _ledger(certified=False, notes=["fixed sigma: epsilon not certified"]))
    assert entry["certified"] is False and entry["tight"] is None and entry["paper"] is None
    assert entry["noise"]["sigma"] == 0.3 and entry["status"].startswith("not certified")


def test_noise_free_run_has_no_dp_claim():
    entry = account_run("a", {"algorithm": "admm_sharing"}, _ledger(certified=False, notes=["no noise"]))
    assert entry["certified"] is False and entry["tight"] is None
    assert entry["status"] == "no differential privacy: this run adds no noise"
    noisy = account_run("a", {"algorithm": "admm_sharing"},
                        _ledger(certified=False, events=[GaussianEvent(sigma=1.0, sensitivity=1.0, count=3)]))
    assert noisy["status"].startswith("not certified")


def test_certified_run_gets_paper_and_tight_bounds():
    events = [GaussianEvent(sigma=5.0, sensitivity=1.0, count=10, party="p1"),
              GaussianEvent(sigma=8.0, sensitivity=1.0, count=10, party="p2")]
    bound = {"name": "admm_sharing.corollary1", "inputs": {"epsilon": 1.0, "delta": 1e-5, "epochs": 10,
                                                            "delta_prime": 1e-5}}
    entry = account_run("a", {"algorithm": "admm_sharing"},
                        _ledger(certified=True, events=events, paper_bound=bound, seeds=2))
    assert entry["status"] == ("certified; noise reproducible from the public seed: a research comparison, "
                               "not a release") and entry["seeds"] == 2
    assert entry["certified"] is True and entry["noise_source"] == "seeded"
    tight, paper = entry["tight"]["epsilon"], entry["paper"]["epsilon"]
    assert math.isfinite(tight) and 0 < tight < paper
    assert entry["noise"] == {"releases": {"gaussian": 20}, "sigma_min": 5.0, "sigma_max": 8.0}


def test_certified_without_delta_is_an_error():
    with pytest.raises(ValueError, match="without delta"):
        account_run("a", {}, _ledger(certified=True, delta=None,
                                     events=[GaussianEvent(sigma=1.0, sensitivity=1.0)]))


def test_os_noise_certificate_says_so():
    led = PrivacyLedger(events=[GaussianEvent(sigma=5.0, sensitivity=1.0, count=10, party="p1")],
                        certified=True, delta=1e-5, noise_source="os")
    entry = account_run("a", {"algorithm": "admm_sharing"}, {"runs": [led.to_dict()]})
    assert entry["noise_source"] == "os"
    assert entry["status"] == "certified; noise drawn from OS entropy (os.urandom) on every draw"


def test_allow_large_delta_certificate_says_delta_may_be_at_least_one_over_n():
    """Issue 18: a run let through with allow_large_delta: true is not certified silently."""
    led = PrivacyLedger(events=[GaussianEvent(sigma=5.0, sensitivity=1.0, count=10, party="p1")],
                        certified=True, delta=0.01)
    block = {"algorithm": "pp_admm", "delta": 0.01, "allow_large_delta": True}
    entry = account_run("a", block, {"runs": [led.to_dict()]})
    assert entry["certified"] is True and entry["allow_large_delta"] is True
    assert entry["status"] == ("certified, but delta may be >= 1/n (allow_large_delta: true); noise "
                               "reproducible from the public seed: a research comparison, not a release")
    assert "did not require the run's delta to be below 1/n" in entry["delta_note"]
    assert "publishes a record outright" in entry["delta_note"]
    checked = account_run("a", {**block, "allow_large_delta": False}, {"runs": [led.to_dict()]})
    assert "allow_large_delta" not in checked and "delta_note" not in checked
    assert checked["status"].startswith("certified; ")


def test_a_non_finite_number_in_an_entry_is_an_accounting_failure(monkeypatch):
    """An infinite epsilon certifies nothing and JSON cannot hold it: the run's entry records the failure."""
    import ppml.accounting

    block = {"algorithm": "pp_admm", "dataset": "d"}
    monkeypatch.setattr(ppml.accounting, "account_run", lambda name, block, ledger: {
        "name": name, "paper": {"epsilon": 2.0}, "tight": {"epsilon": 1.0, "parties": [{"epsilon": math.inf}]}})
    entry = ppml.accounting.run_privacy("r", block, {"runs": []})
    assert entry == {"name": "r", "algorithm": "pp_admm", "dataset": "d", "certified": False, "paper": None,
                     "tight": None, "status": "accounting failed: ValueError: the accounting gave a non-finite "
                                              "number at tight.parties[0].epsilon"}


@pytest.mark.parametrize("target, certified", [(None, True), (100.0, True), (0.5, False)])
def test_a_run_is_certified_only_when_its_tight_epsilon_meets_its_target(target, certified):
    led = PrivacyLedger(events=[GaussianEvent(sigma=5.0, sensitivity=1.0, count=10)], certified=True,
                        delta=1e-5, target_epsilon=target, notes=["budget by the 'paper' calibration"])
    entry = account_run("a", {"algorithm": "pp_admm"}, {"runs": [led.to_dict()]})
    spent = entry["tight"]["epsilon"]
    assert 0.5 < spent < 100.0  # the tight epsilon is stated either way
    assert entry["certified"] is certified
    if not certified:
        assert entry["status"].startswith(f"not certified at the target: the tight epsilon of the recorded "
                                          f"mechanisms is {spent:.4g} > the target 0.5")
