"""The scikit-learn baselines of every dataset: centralized (all features / rows) and local (first party).

Every error rate is shown beside the majority-class error (the trivial classifier that predicts the training
labels' majority class). Both claims are comparisons with a stated margin: twice the standard error of the
difference on the test rows (z = 2, about 95% two-sided), computed as if the two test means were
independent. The two models are scored on the same rows, so their per-row results are positively correlated
and the true (paired) standard error is smaller: the margin is conservative, and a tie is NOT SHOWN.
"""

from __future__ import annotations

import math

from ppml.report.base import NOT_CHECKED, Claim, ReportOutput, Run, Runs, compare, markdown_table

PAPER = "baselines"
Z = 2.0  # margins are Z standard errors


def build(runs: Runs, out: ReportOutput) -> list[Claim]:
    rows = []
    claims = []
    datasets = sorted({r.get("dataset") for r in runs.select(algorithm="centralized")})
    for ds in datasets:
        central = runs.one(algorithm="centralized", dataset=ds)
        local = runs.one(algorithm="local", dataset=ds)
        for run in (central, local):
            if run is None:
                continue
            m = run.metrics
            if not run.available:
                rows.append([run.name, ds, run.get("algorithm"), m.get("status"), *[None] * 6])
                continue
            rows.append([run.name, ds, run.get("algorithm"), "ok", m.get("train_objective"),
                         m.get("test_logloss"), m.get("test_auc"), m.get("test_accuracy"), m.get("test_error"),
                         m.get("test_majority_error")])
        if local is not None:
            claims.append(collaboration_claim(ds, central, local))
        claims.append(majority_claim(ds, central))
    _figure(runs, datasets, out)
    out.table("baselines", "# Centralized and local baselines (scikit-learn, f = mean log loss + λ/2‖w‖²)\n\n"
              "The majority-class error is the test error of predicting the training labels' majority class "
              "for every row: a model whose error is not below it has learned nothing a constant could "
              "not.\n\n"
              + markdown_table(["run", "dataset", "algorithm", "status", "train objective", "test log loss",
                                "test AUC", "test accuracy", "test error", "majority-class error"], rows))
    return claims


def _missing(run: Run | None, keys: tuple[str, ...]) -> str | None:
    """Why `run` cannot be used (not present, not run, or its metrics predate `keys`), or None."""
    if run is None:
        return "no run"
    if not run.available:
        return f"{run.name}: {run.metrics.get('status')}"
    lacking = [k for k in keys if not isinstance(run.metrics.get(k), (int, float))]
    if lacking:
        return f"{run.name}: metrics lack {', '.join(lacking)} (re-run train_{run.get('algorithm')}@{run.name})"
    return None


def collaboration_claim(ds: str, central: Run | None, local: Run) -> Claim:
    """The centralized model's test log loss is below the local one's by more than 2 standard errors."""
    keys = ("test_logloss", "test_logloss_sd", "n_test")
    claim = dict(id=f"baselines-{ds}-collaboration-helps", paper=PAPER,
                 statement=f"{ds}: the centralized model (all features) has lower test log loss than the "
                           "local one",
                 published="implied by every paper's motivation")
    why = _missing(central, keys) or _missing(local, keys)
    if why:
        return Claim(**claim, ours=why, verdict=NOT_CHECKED, margin="2 SE of the log-loss difference")
    c, lo = central.metrics, local.metrics
    se = math.sqrt(c["test_logloss_sd"] ** 2 / c["n_test"] + lo["test_logloss_sd"] ** 2 / lo["n_test"])
    diff = lo["test_logloss"] - c["test_logloss"]
    return Claim(**claim, ours=f"centralized {c['test_logloss']:.4f} vs local {lo['test_logloss']:.4f} "
                               f"(difference {diff:+.2e})",
                 verdict=compare(diff, Z * se),
                 margin=f"{Z * se:.2e} = 2 SE of the difference of two mean log losses on {c['n_test']} test "
                        "rows, from the per-row log-loss SDs (unpaired: conservative)")


def majority_claim(ds: str, central: Run | None) -> Claim:
    """The centralized model's test error is below the majority-class error by more than 2 standard errors."""
    claim = dict(id=f"baselines-{ds}-beats-majority-class", paper=PAPER,
                 statement=f"{ds}: the centralized model's test error is below the majority-class error",
                 published="implied: a classifier must beat predicting the majority class")
    why = _missing(central, ("test_error", "test_majority_error", "n_test"))
    if why:
        return Claim(**claim, ours=why, verdict=NOT_CHECKED, margin="2 SE of the error difference")
    m = central.metrics
    e, e_maj, n = m["test_error"], m["test_majority_error"], m["n_test"]
    se = math.sqrt((e * (1 - e) + e_maj * (1 - e_maj)) / n)
    return Claim(**claim, ours=f"error {e:.4f} vs majority class {e_maj:.4f} (difference {e_maj - e:+.4f})",
                 verdict=compare(e_maj - e, Z * se),
                 margin=f"{Z * se:.4f} = 2 SE of the difference of two error rates on {n} test rows "
                        "(binomial, unpaired: conservative)")


def _figure(runs: Runs, datasets: list[str], out: ReportOutput) -> None:
    """Test log loss of the centralized and local baselines per dataset (bar chart + DVC plot data)."""
    import matplotlib.pyplot as plt

    rows = []
    for ds in datasets:
        for algorithm in ("centralized", "local"):
            run = runs.one(algorithm=algorithm, dataset=ds)
            if run is not None and run.available:
                rows.append({"dataset": ds, "algorithm": algorithm, "test_logloss": run.metrics["test_logloss"]})
    out.plot_data("baselines_test_logloss", rows, series=("algorithm",))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(datasets)), 3.2))
    for k, algorithm in enumerate(("centralized", "local")):
        xs = [i + 0.38 * k for i, ds in enumerate(datasets) for r in rows
              if r["dataset"] == ds and r["algorithm"] == algorithm]
        ys = [r["test_logloss"] for r in rows if r["algorithm"] == algorithm]
        ax.bar(xs, ys, width=0.36, label=algorithm)
    ax.set_xticks([i + 0.19 for i in range(len(datasets))], datasets)
    ax.set_ylabel("test log loss")
    ax.set_title("scikit-learn baselines")
    ax.legend()
    out.figure("baselines_test_logloss", fig)
