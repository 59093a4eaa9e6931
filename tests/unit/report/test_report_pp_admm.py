"""PP-ADMM report: tables, figures and claims from hand-made runs."""

import matplotlib
import pytest

from ppml.report import pp_admm as report
from ppml.report.base import ReportOutput, Run, Runs

matplotlib.use("Agg")

EPS = (0.5, 1.0, 2.0, 10.0)
MAJORITY = 0.25


def _run(algorithm, error, *, epsilon=None, block=None, curve=(0.6, 0.5), std=0.002, name=None, **metrics_extra):
    metrics = {"algorithm": algorithm, "dataset": "adult", "test_error": error, "test_error_mean": error,
               "test_error_std": std, "seeds": 2, "majority_error": MAJORITY, **metrics_extra}
    if epsilon is not None:
        metrics["epsilon"] = epsilon
    history = {"runs": [{"records": [{"epoch": i + 1, "train_loss": v} for i, v in enumerate(curve)]}] * 2}
    if name is None:
        name = f"{algorithm}-adult" + (f"-eps{epsilon:g}" if epsilon is not None else "")
        name += "".join(f"-{k}{v}" for k, v in (block or {}).items())
    params = {"algorithm": algorithm, "dataset": "adult", **(block or {})}
    if epsilon is not None:
        params["epsilon"] = epsilon
    privacy = {"paper": {"epsilon": epsilon, "epsilon_cks": 0.8}, "tight": {"epsilon": 0.7, "method": "rdp"},
               "status": "certified", "certified": True}
    return Run(name=name, params=params, metrics=metrics, history=history, privacy=privacy)


# the paper's pattern: PP/IPP near the best achievable, baselines worse, their loss rising as epsilon falls
GOOD = {"pp_admm": (0.22, 0.152, 0.151, 0.15), "ipp_admm": (0.2, 0.14, 0.139, 0.138),
        "dvp": (0.4, 0.3, 0.27, 0.24), "m_admm": (0.45, 0.35, 0.3, 0.26), "r_admm": (0.42, 0.33, 0.3, 0.24)}
BASELINE_LOSS = {0.5: 0.68, 1.0: 0.62, 2.0: 0.56, 10.0: 0.5}  # below ln 2: not degenerate


def _grid(errors):
    """The main grid and the equal-privacy one, with the same errors."""
    runs = [_run("decentralized_admm", 0.15), _run("centralized", 0.148, name="centralized-adult")]
    for block in ({}, {"calibration": "tight"}):
        for algorithm, by_eps in errors.items():
            for eps, e in zip(EPS, by_eps):
                loss = BASELINE_LOSS[eps] if algorithm in report.BASELINES else 0.4
                runs.append(_run(algorithm, e, epsilon=eps, curve=(0.7, loss), block=block))
    return runs


def _studies(splits=(0.16, 0.18, 0.2), beta=(0.2, 0.16, 0.19), c_loss=(0.2, 0.15, 0.19),
             alpha=(0.15, 0.17, 0.2), sends=(10.0, 8.0, 2.0)):
    runs = []
    for value, e in zip((0.001, 0.1, 0.5), splits):
        runs.append(_run("pp_admm", e, epsilon=1.0, block={"splits": value, "beta": 1e-6}))
    for value, e in zip((1e-6, 10 ** -3.5, 1e-1), beta):
        runs.append(_run("pp_admm", e, epsilon=1.0, block={"beta": value}))
    for value, e in zip((0.5, 2.0, 8.0), c_loss):
        runs.append(_run("ipp_admm", e, epsilon=1.0, block={"C_loss": value}))
    for value, e, n in zip((1e-3, 1.0, 10.0), alpha, sends):
        runs.append(_run("ipp_admm", e, epsilon=1.0, block={"alpha": value}, broadcasts_mean=n))
    return runs


def _verdicts(runs, tmp_path):
    return {c.id.removeprefix("pp_admm-adult-").removesuffix(report.EQUAL_SUFFIX): c
            for c in report.build(Runs(runs), ReportOutput(tmp_path))}


def test_build_writes_the_tables_and_returns_the_claims(tmp_path):
    # the claims themselves: tests/unit/report/test_pp_admm_claims.py
    runs = _grid(GOOD) + _studies()
    claims = _verdicts(runs, tmp_path)
    assert set(claims) == {c.id.removeprefix("pp_admm-adult-").removesuffix(report.EQUAL_SUFFIX)
                           for c in report.claims(Runs(runs))}
    assert len(claims) >= 9 and all(c.paper == "pp_admm" for c in claims.values())
    table = (tmp_path / "tables" / "pp_admm_error.md").read_text()
    assert "0.1520 ± 0.0020" in table and "ε = 10" in table and "majority class" in table
    assert "splits" in (tmp_path / "tables" / "pp_admm_studies.md").read_text()
    assert "0.7000 (rdp)" in (tmp_path / "tables" / "pp_admm_privacy.md").read_text()
    equal = (tmp_path / "tables" / "pp_admm_equal_privacy.md").read_text()
    assert "| PP-ADMM | 10 | 0.1500 ± 0.0020 | 0.7000 | 0.1500 ± 0.0020 | 0.7000 |" in equal


def test_the_baselines_loss_claim_reads_the_curves(tmp_path):
    flat = dict(BASELINE_LOSS)
    BASELINE_LOSS.update({1.0: 0.5, 2.0: 0.5})
    try:
        claims = _verdicts(_grid(GOOD), tmp_path)
    finally:
        BASELINE_LOSS.update(flat)
    assert claims["claim6-baseline-loss-rises"].verdict == "NOT SHOWN"
    assert claims["claim6-pp-ipp-lower-loss"].verdict == "PASS"


def test_missing_runs_leave_claims_unchecked(tmp_path):
    claims = report.build(Runs([]), ReportOutput(tmp_path))
    assert claims and all(c.verdict == "NOT CHECKED" for c in claims)
    assert all("not checked" in c.ours for c in claims)


def test_duplicate_grid_runs_are_an_error(tmp_path):
    runs = [_run("pp_admm", 0.2, epsilon=1.0), _run("pp_admm", 0.2, epsilon=1.0, block={"T": 30})]
    with pytest.raises(LookupError, match="two pp_admm runs"):
        report.build(Runs(runs), ReportOutput(tmp_path))


def test_baselines_check_tells_noise_from_reconstruction(tmp_path):
    # DVP at epsilon 10: local models at the majority class, noise-off twin far below it -> the noise (method)
    # M-ADMM: its noise-off twin is no better -> the reconstruction is suspect
    runs = _grid(dict(GOOD, dvp=(0.4, 0.3, 0.27, 0.251), m_admm=(0.45, 0.35, 0.3, 0.26)))
    runs += [_run("dvp", 0.183, epsilon=10.0, block={"noise": False}),
             _run("m_admm", 0.255, epsilon=10.0, block={"noise": False})]
    report.build(Runs(runs), ReportOutput(tmp_path))
    text = (tmp_path / "tables" / "pp_admm_baselines_check.md").read_text()
    assert "DVP on adult at ε = 10 is not below the majority class (0.2510 vs 0.2500" in text
    assert "the noise (the method): with the noise off the same iteration reaches 0.1830" in text
    assert "M-ADMM on adult at ε = 10" in text and "reconstruction of the non-private iteration is suspect" in text
    assert "R-ADMM on adult at ε = 10 is not below" not in text


def test_baselines_check_without_majority_error_says_not_checked(tmp_path):
    runs = [Run(name=r.name, params=r.params, metrics={k: v for k, v in r.metrics.items() if k != "majority_error"},
                history=r.history, privacy=r.privacy) for r in _grid(GOOD)]
    report.build(Runs(runs), ReportOutput(tmp_path))
    text = (tmp_path / "tables" / "pp_admm_baselines_check.md").read_text()
    assert "DVP on adult at ε = 10: the run records no majority_error, not checked." in text
    assert "Every baseline is below" not in text


def _with_average(run, averages, *, scale=None):
    """`run` with per-seed finals of the average model's error (and the agents' reading scale)."""
    seeds = [{**seed, "final": {"test_error_average_model": a},
              "extra": {"agents": {"agent1": {"scale": scale}}} if scale else {}}
             for seed, a in zip(run.history["runs"], averages)]
    return Run(name=run.name, params=run.params, metrics=run.metrics, history={"runs": seeds},
               privacy=run.privacy)


def test_every_error_table_shows_both_models_and_the_scale(tmp_path):
    runs = [_with_average(r, (0.14, 0.16)) if r.get("algorithm") == "pp_admm" else r for r in _grid(GOOD)]
    runs += [_with_average(r, (0.19, 0.21)) for r in _studies()]
    report.build(Runs(runs), ReportOutput(tmp_path))
    table = (tmp_path / "tables" / "pp_admm_error.md").read_text()
    assert "### agents' own models" in table and "### average model" in table
    assert "0.1500 ± 0.0141" in table  # the average model over the two seeds of each PP-ADMM run
    assert "Every row runs on one scale: each agent's summed loss" in table
    assert "ε needed for a given error (Fig. 5)" in table
    studies = (tmp_path / "tables" / "pp_admm_studies.md").read_text()
    assert "average model" in studies and "0.2000 ± 0.0141" in studies and "majority class" in studies
    for model in ("agents", "average"):  # one plot per model
        assert (tmp_path / "plots" / "data" / f"pp_admm_error_vs_epsilon-adult-{model}.csv").exists()


def test_rows_on_different_scales_are_flagged(tmp_path):
    runs = [Run(name=r.name, params=r.params, metrics={**r.metrics, "loss_scale": "mean"}, history=r.history,
                privacy=r.privacy) if r.get("algorithm") == "dvp" else r for r in _grid(GOOD)]
    report.build(Runs(runs), ReportOutput(tmp_path))
    table = (tmp_path / "tables" / "pp_admm_error.md").read_text()
    assert "different scales" in table and "not comparable" in table


def test_units_table_sorts_eta_on_the_mean_scale(tmp_path):
    block = {"noise": False, "lam_hat_rule": "lam", "lam": 1e-4}
    runs = [_with_average(_run("pp_admm", e, epsilon=10.0, block={**block, "variant": "literal", "eta": eta},
                               name=f"pp_admm-adult-units-eta{eta}"), (e, e), scale=1.0)
            for eta, e in ((0.5, 0.2512), (0.005, 0.179), (0.5 / 7000, 0.170))]
    summed = _run("pp_admm", 0.1701, epsilon=10.0, block=block, name="pp_admm-adult-decomp-opt")
    runs.append(_with_average(summed, (0.17, 0.17), scale=7000.0))
    runs += [_run("pp_admm", 0.2036, epsilon=10.0),
             _run("pp_admm", 0.2512, epsilon=10.0, block={"variant": "literal"},
                  name="pp_admm-adult-literal-eps10")]
    report.build(Runs(runs), ReportOutput(tmp_path))
    text = (tmp_path / "tables" / "pp_admm_units.md").read_text()
    sweep, private = text.split("## With the noise")
    order = [line.split("|")[3].strip() for line in sweep.splitlines() if line.startswith("| η")]
    assert order == ["0.5", "0.005", "7.14e-05", "7.14e-05"]
    assert "η and β read on the summed loss (`variant: paper`)" in sweep
    assert "η and β read on the mean-loss scale as printed (`variant: literal`)" in sweep
    assert "0.2036 ± 0.0020" in private and "0.2512 ± 0.0020" in private


def test_eps_split_table_marks_the_fixed_lam_hat_as_not_private(tmp_path):
    runs = _grid(GOOD)
    for eps in (1.0, 10.0):
        ratio = _run("pp_admm", 0.24, epsilon=eps, block={"eps3_ratio": 0.5})
        large_delta = {"certified": True, "paper": {"epsilon": eps}, "allow_large_delta": True} if eps == 10 else None
        runs.append(Run(name=ratio.name, params=ratio.params, metrics=ratio.metrics, history=ratio.history,
                        privacy=large_delta or ratio.privacy))
        fixed = _run("pp_admm", 0.2, epsilon=eps, block={"lam_hat_rule": "lam", "lam": 1e-3})
        runs.append(Run(name=fixed.name, params=fixed.params, metrics=fixed.metrics, history=fixed.history,
                        privacy={"certified": False, "paper": None, "tight": None,
                                 "status": "not certified"}))
    report.build(Runs(runs), ReportOutput(tmp_path))
    text = (tmp_path / "tables" / "pp_admm_eps_split.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| adult")]
    cells = [[c.strip() for c in r.split("|")[2:4]] for r in rows]
    assert cells == [["1", "0.99"], ["1", "0.5"], ["1", "fixed λ̂"], ["10", "0.99"], ["10", "0.5"],
                     ["10", "fixed λ̂"]]
    assert all(("not a privacy guarantee" in r) == ("fixed" in r) for r in rows)
    assert "certified (paper bound ε = 1)" in rows[0]
    assert "δ may be ≥ 1/n (allow_large_delta: true)" in rows[4]
    assert not any("δ may be" in r for i, r in enumerate(rows) if i != 4)


def test_line_3s_explanation_quotes_the_runs_as_the_tables_show_them(tmp_path):
    """The numbers of line 3's explanation are the runs' own, written as the cited tables write them: λ̂/N of
    the main grid where PP and IPP stay nearer the majority class than the non-private run, the noise-off
    decomposition run there, and the certified ε-split row with the lowest error at the largest such ε."""
    at_majority = {"pp_admm": (0.2512, 0.2509, 0.2497, 0.2036), "ipp_admm": (0.2513, 0.2508, 0.2489, 0.198)}
    runs = _grid(dict(GOOD, **at_majority))
    lam_hat = {0.5: 0.10932856, 1.0: 0.05452957, 2.0: 0.02713106, 10.0: 0.00522134}
    for run in runs:
        if run.get("algorithm") == "pp_admm":
            run.metrics["lam_hat"] = lam_hat[run.get("epsilon")]
    decomposition = _run("pp_admm", 0.25111, epsilon=1.0, block={"noise": False}, std=0.00004,
                         name="pp_admm-adult-decomp-lamhat-eps1", noise=False)
    split = [_run("pp_admm", e, epsilon=2.0, block={"eps3_ratio": r}, std=s)
             for r, e, s in ((0.9, 0.21224, 0.00321), (0.5, 0.2533, 0.0061))]
    fixed = _run("pp_admm", 0.19, epsilon=2.0, block={"lam_hat_rule": "lam", "lam": 1e-3})
    fixed.privacy = {"certified": False, "paper": None, "tight": None, "status": "not certified"}
    every = Runs([*runs, decomposition, *split, fixed])
    report.build(every, ReportOutput(tmp_path))
    explanation = _line3(every).explanation
    assert "0.1093 / 0.05453 / 0.02713 at ε = 0.5 / 1 / 2 with the paper's ε_i3 = 0.99 ε_i1" in explanation
    assert "nearer the majority class's 0.2500 than the non-private ADMM's 0.1500" in explanation
    assert "noise off with line 3's λ̂: 0.2511 ± 0.0000 at ε = 1" in explanation
    assert "ε_i3 = 0.9 ε_i1, still certified: 0.2122 ± 0.0032 at ε = 2" in explanation
    rows = (tmp_path / "tables" / "pp_admm_eps_split.md").read_text().splitlines()
    assert any(r.startswith("| adult | 2 | 0.9 |") and "| 0.2122 ± 0.0032 |" in r for r in rows)
    decomposition_table = (tmp_path / "tables" / "pp_admm_decomposition.md").read_text()
    assert "| lamhat-eps1 | 1 | False | line3 |" in decomposition_table
    assert "0.2511 ± 0.0000" in decomposition_table
    # without the runs it reads, the explanation states the mechanism and no number
    bare = _line3(Runs(runs)).explanation
    assert "0.1093 / 0.05453 / 0.02713" in bare and "still certified" not in bare and "noise off" not in bare
    assert "0.1093" not in _line3(Runs(runs[:2])).explanation  # no grid: the mechanism alone


def _line3(runs: Runs):
    """The line-3 miss of the Adult claims, as report.claims builds it."""
    grid, baseline = report._grid(runs)
    return report._line3_miss(report.Inputs("adult", grid.get("adult", {}), baseline.get("adult"), {},
                                            report._centralized(runs, "adult"), runs))


def test_m_admms_penalty_schedule_in_the_loss_note_is_its_runs(tmp_path):
    def grid(**block):
        run = _run("m_admm", 0.3, epsilon=1.0, block={"q": 1.05, "eta": 0.5, "T": 30, **block})
        return {"adult": {"m_admm": {1.0: run}}}

    assert report._m_admm_penalties(grid()) == "q = 1.05: 0.525 in round 1, 2.16 in round 30"
    assert report._m_admm_penalties(grid(eta_max=1.0)) == "q = 1.05: 0.525 in round 1, 1 in round 30"
    assert report._m_admm_penalties({}) == "q > 1"
    assert "η_i(t) = q^t η (q = 1.05: 0.525 in round 1, 2.16 in round 30)" in report._loss_note(grid())
