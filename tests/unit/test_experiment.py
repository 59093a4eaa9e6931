"""The experiment runner: stage keys (noise_source, allow_large_delta), delta against 1/n, non-finite params."""

import numpy as np
import pytest
import yaml

from ppml.config import ParamError, run_dir
from ppml.experiment import experiment_params, run
from ppml.io import save_party, write_json
from tests.algorithms.horizontal_data import horizontal


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A prepared horizontal dataset of 5 agents x 120 rows (1/n = 1/120) and an evaluator."""
    directory = tmp_path_factory.mktemp("toy")
    parties, evaluator = horizontal(np.random.default_rng(3), n=120, d=4)
    for p in [*parties, evaluator]:
        save_party(directory / f"{p.name}.npz", p)
    write_json(directory / "manifest.json", {
        "dataset": "toy", "available": True,
        "parties": [{"name": p.name, "file": f"{p.name}.npz"} for p in parties],
        "evaluator": {"name": evaluator.name, "file": f"{evaluator.name}.npz"}})
    return directory


def block(**kw):
    return {"algorithm": "pp_admm", "dataset": "toy", "T": 3, "epsilon": 1.0, "delta": 1e-3,
            "delta_i1": 1e-3, **kw}


def noise_of(outputs):
    return [r["test_error"] for r in outputs["history"]["runs"][0]["records"]]


def test_seeded_noise_repeats_and_is_labelled(prepared):
    a = run("pp-toy", block(), prepared, seed=7)
    b = run("pp-toy", block(), prepared, seed=7)
    assert a["history"] == b["history"]
    assert a["ledger"]["runs"][0]["noise_source"] == "seeded" and a["run"]["noise_source"] == "seeded"


def test_os_noise_differs_run_to_run_and_is_labelled(prepared):
    a = run("pp-toy", block(noise_source="os"), prepared, seed=7)
    b = run("pp-toy", block(noise_source="os"), prepared, seed=7)
    assert a["ledger"]["runs"][0]["noise_source"] == "os" and a["run"]["noise_source"] == "os"
    assert a["history"]["runs"][0]["final"] != b["history"]["runs"][0]["final"]
    # the same graph: only the noise is fresh (each party's process facts, its peak RSS, are a measurement)
    def traffic(out):
        return [{k: v for k, v in r.items() if k != "parties"} for r in out["comm"]["runs"]]

    assert traffic(a) == traffic(b) and traffic(a)[0]["messages"] > 0


def test_noise_source_is_validated():
    with pytest.raises(ParamError, match=r"experiments\.e\.noise_source must be one of \['seeded', 'os'\], "
                                         r"got 'urandom'"):
        experiment_params("e", block(noise_source="urandom"))
    with pytest.raises(ParamError, match=r"experiments\.e\.noise_source: 'os' has nothing to draw: algorithm "
                                         r"'centralized'"):
        experiment_params("e", {"algorithm": "centralized", "dataset": "toy", "noise_source": "os"})
    with pytest.raises(ParamError, match=r"experiments\.e\.allow_large_delta must be true or false, got 'yes'"):
        experiment_params("e", block(allow_large_delta="yes"))


def test_delta_must_be_below_one_over_n(prepared):
    with pytest.raises(ParamError, match=r"experiments\.pp-toy\.delta must be below 1/n = 0\.00833 "
                                         r"\(n = 120 records per party\), got 0\.5; set allow_large_delta"):
        run("pp-toy", block(delta=0.5), prepared, seed=1)
    with pytest.raises(ParamError, match=r"experiments\.pp-toy\.delta_i1 must be below 1/n"):
        run("pp-toy", block(delta_i1=0.01), prepared, seed=1)
    out = run("pp-toy", block(delta=0.01, allow_large_delta=True), prepared, seed=1)
    assert out["run"]["status"] == "ok"


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "inf", 10**400,
                                   yaml.safe_load("x: -.inf")["x"]])
def test_non_finite_parameters_are_refused(value):
    with pytest.raises(ParamError, match=r"experiments\.e\.epsilon must be a finite number"):
        experiment_params("e", block(epsilon=value))


def test_params_data_mismatch_names_the_key(prepared):
    with pytest.raises(ParamError, match=r"^experiments\.adm-toy\.dataset must be vertically partitioned"):
        run("adm-toy", {"algorithm": "admm_sharing", "dataset": "toy"}, prepared, seed=1)
    with pytest.raises(ParamError, match=r"^experiments\.pp-toy\.agents is 3, but the prepared data has 5"):
        run("pp-toy", block(agents=3), prepared, seed=1)


def test_train_stage_reports_a_mismatch_in_one_line(prepared, tmp_path, capsys):
    from stages.train import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "experiments": {"x": block(delta=0.5)}}))
    out = tmp_path / "run"
    assert main(["--experiment", "x", "--params", str(params), "--data", str(prepared), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("experiment x: experiments.x.delta must be below 1/n") and "\n" not in err
    assert not out.exists()
    # an experiment of a pipeline section is named by its DVC stage, as `dvc repro` takes it
    params.write_text(yaml.safe_dump({"seed": 1, "pp_admm_experiments": {"x": block(delta=0.5)}}))
    assert main(["--experiment", "x", "--params", str(params), "--data", str(prepared), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train_pp_admm@x: pp_admm_experiments.x.delta must be below 1/n"), err
    assert not out.exists()


def test_an_algorithm_section_takes_only_its_algorithm():
    with pytest.raises(ParamError, match=r"paillier_sgd_experiments\.e\.algorithm must be 'paillier_sgd' in "
                                         r"paillier_sgd_experiments .*got 'pp_admm'; put the experiment in "
                                         r"pp_admm_experiments"):
        experiment_params("e", block(), section="paillier_sgd_experiments")
    _, params, _ = experiment_params("e", {"algorithm": "paillier_sgd", "dataset": "d", "encrypted": False},
                                     section="paillier_sgd_experiments")
    assert params.batch_size > 0


def test_all_experiments_joins_the_sections():
    from ppml.config import all_experiments

    params = {"experiments": {"a": {"algorithm": "local"}}, "fdml_experiments": {"b": {}}}
    assert all_experiments(params) == {"a": ("experiments", {"algorithm": "local"}),
                                       "b": ("fdml_experiments", {})}
    with pytest.raises(ParamError, match="experiment 'a' is in both experiments and fdml_experiments"):
        all_experiments({"experiments": {"a": {}}, "fdml_experiments": {"a": {}}})
    with pytest.raises(ParamError, match="no experiments"):
        all_experiments({"experiments": {}})


def test_majority_error():
    from ppml.algorithms._majority import majority_error

    assert majority_error(np.array([0, 0, 1]), np.array([1, 1, 0, 0])) == 0.5
    assert majority_error(np.array([1, 1, 0]), np.array([1, 1, 1, 0])) == 0.25
    assert majority_error(np.array([0, 1]), np.array([1, 1, 1, 0])) == 0.75  # a tie predicts 0
    with pytest.raises(ValueError, match="needs labels"):
        majority_error(np.array([]), np.array([1]))


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # dp-accounting, on the absurd epsilon
def test_absurd_epsilon_trains_and_its_accounting_failure_is_recorded(prepared, tmp_path):
    """epsilon = 1e300 is finite and trains; its train stage records the accounting failure in the run's
    privacy.json, and the account stage gathers it beside the other runs' entries.

    (With the paper's calibration epsilon^2 overflows: that is refused when the parameters are built.)
    """
    from stages.account import main as account
    from stages.train import main as train

    with pytest.raises(ParamError, match=r"experiments\.e: epsilon cannot be calibrated with calibration 'paper'"
                                         r".*got 1e\+300"):
        experiment_params("e", block(epsilon=1e300))
    blocks = {"huge": block(epsilon=1e300, T=2, calibration="exact"), "fine": block(T=2)}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "experiments": blocks}))
    for name, spec in blocks.items():  # into the run directories the account stage reads
        assert train(["--experiment", name, "--params", str(params), "--data", str(prepared), "--out",
                      str(run_dir(tmp_path / "runs", name, spec))]) == 0
    assert account(["--params", str(params), "--runs", str(tmp_path / "runs"), "--out",
                    str(tmp_path / "privacy.json")]) == 0
    import json

    entries = {e["name"]: e for e in json.loads((tmp_path / "privacy.json").read_text())["runs"]}
    assert entries["huge"]["status"].startswith("accounting failed: ") and entries["huge"]["tight"] is None
    assert entries["fine"]["status"].startswith("certified; noise reproducible from the public seed")


def test_transport_and_timeout_are_validated():
    from ppml.config import ParamError
    from ppml.experiment import experiment_params

    base = {"algorithm": "admm_sharing", "dataset": "toy"}
    with pytest.raises(ParamError, match=r"experiments.x.transport must be one of \['inprocess', 'ray', 'grpc'\], got 'mpi'"):
        experiment_params("x", {**base, "transport": "mpi"})
    with pytest.raises(ParamError, match=r"experiments.x.timeout must be > 0, got -1.0"):
        experiment_params("x", {**base, "timeout": -1})
    with pytest.raises(ParamError, match=r"experiments.x.timeout must be a number of seconds, got 'soon'"):
        experiment_params("x", {**base, "timeout": "soon"})


def test_a_seed_that_failed_fails_the_run():
    """A model the optimizer never moved is `status: failed: ...` in run.json, not `ok` (issue 18)."""
    from types import SimpleNamespace

    from ppml.experiment import split_summary, summarize

    _, params, _ = experiment_params("c", {"algorithm": "centralized", "dataset": "d"})
    ok = SimpleNamespace(final={"test_error": 0.2}, converged=True, comm={"bytes": 0, "messages": 0})
    failed = SimpleNamespace(final={"test_error": 0.5, "status": "failed: lbfgs stopped after 0 iterations"},
                             converged=False, comm={"bytes": 0, "messages": 0})
    block = {"algorithm": "centralized", "dataset": "d"}
    assert summarize("c", block, params, [ok, ok], [1.0, 1.0])["status"] == "ok"
    summary = summarize("c", block, params, [ok, failed], [1.0, 1.0])
    assert summary["status"] == "failed: lbfgs stopped after 0 iterations"
    described, metrics, timing = split_summary(summary, params)
    assert described["status"] == summary["status"] and "status" not in metrics
    assert metrics["test_error"] == 0.35 and "lam" in described and "lam" not in metrics
    assert timing["values"] == {"seconds": 1.0, "seconds_mean": 1.0, "seconds_std": 0.0}
    assert not {"seconds", "seconds_mean", "seconds_std"} & (set(metrics) | set(described))


def _train(tmp_path, prepared, blocks: dict, name: str) -> tuple[int, dict]:
    """The train stage on experiment `name` of `blocks`: its exit status and the files it wrote (by stem)."""
    import json

    from stages.train import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "experiments": blocks}))
    out = tmp_path / "runs" / name
    code = main(["--experiment", name, "--params", str(params), "--data", str(prepared), "--out", str(out)])
    return code, {f.stem: json.loads(f.read_text()) for f in out.glob("*.json")} if out.exists() else {}


def test_train_stage_writes_the_runs_privacy_accounting(prepared, tmp_path):
    """A DP run's privacy.json is account_run's entry for its ledger; a run without a privacy side says so."""
    from ppml.accounting import NO_PRIVACY_SIDE, account_run

    blocks = {"dp": block(T=2), "plain": {"algorithm": "decentralized_admm", "dataset": "toy", "T": 2}}
    code, files = _train(tmp_path, prepared, blocks, "dp")
    assert code == 0 and set(files) == {"history", "ledger", "comm", "privacy", "timing", "run", "metrics"}
    assert files["privacy"] == account_run("dp", blocks["dp"], files["ledger"])
    assert files["privacy"]["status"].startswith("certified; ") and files["privacy"]["tight"]["epsilon"] > 0
    code, files = _train(tmp_path, prepared, blocks, "plain")
    assert code == 0 and account_run("plain", blocks["plain"], files["ledger"]) is None
    assert files["privacy"] == {"name": "plain", "algorithm": "decentralized_admm", "dataset": "toy",
                                "privacy_side": False, "status": NO_PRIVACY_SIDE}
    # timing apart from the metrics
    assert "seconds" in files["timing"]["values"] and "seconds" not in files["metrics"]


def test_a_failing_accounting_is_the_runs_failed_entry(prepared, tmp_path, monkeypatch, caplog):
    """The accountant raising does not lose the trained run: privacy.json records the failure."""
    import ppml.accounting

    def overflow(name, block, ledger):
        raise OverflowError("math range error")

    monkeypatch.setattr(ppml.accounting, "account_run", overflow)
    code, files = _train(tmp_path, prepared, {"dp": block(T=2)}, "dp")
    assert code == 0 and "metrics" in files and files["ledger"]["runs"]
    assert files["privacy"] == {"name": "dp", "algorithm": "pp_admm", "dataset": "toy", "certified": False,
                                "paper": None, "tight": None,
                                "status": "accounting failed: OverflowError: math range error"}
    assert "dp: accounting failed: OverflowError: math range error" in caplog.text
