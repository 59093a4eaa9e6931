"""The scikit-learn baselines of every dataset: centralized (all features / rows) and local (first party).

Every error rate is shown beside the majority-class error (the trivial classifier that predicts the training
labels' majority class).

Claims. "The centralized model beats the local one" is published for a9a and gisette (the ADMM sharing paper,
Sec. 5 and Fig. 3: the all-features baseline well below the first party's): those rows are paper claims of
that paper. On the other datasets it is our own check (a diagnostic), as is "the centralized model ranks better
than the majority class" on every dataset, read on the test AUC (the majority class scores every row alike:
AUC 0.5), because an error rate beside the majority class's measures nothing on imbalanced data (give_credit:
93 % negatives). Log losses of the two models are compared with Welch's t from their per-row SDs: the models are
scored on the same rows, so the paired test would be tighter, but the runs do not record per-row losses; the
unpaired half-width bounds the paired one when the per-row losses correlate positively. The AUC is tested
against 0.5 with Hanley and McNeil's standard error (the larger of the two ways to assign the classes).
"""

from __future__ import annotations

from ppml.report import stats
from ppml.report.base import (DIAGNOSTIC, NOT_CHECKED, PAPER_CLAIM, POWER, PROPERTY, Claim, ReportOutput, Run, Runs,
                              markdown_table, why_not)

PAPER = "baselines"
#: Datasets where a paper publishes that the centralized model beats the local one: the ADMM sharing paper,
#: whose claims these rows are (its Fig. 3 draws both baselines).
PUBLISHED_COLLABORATION = {"a9a": "Fig. 3(a)", "gisette": "Fig. 3(b)"}
ADMM_SHARING = "admm_sharing"
TABLE = "reports/tables/baselines.md"


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
        return f"{run.name}: metrics lack {', '.join(lacking)} (re-run stage train_{run.get('algorithm')})"
    return None


def _horizontal(central: Run | None, local: Run) -> bool:
    """Whether the local model holds every feature (a row split: one agent's rows), read off the two runs."""
    n_local = local.metrics.get("n_features")
    return central is not None and n_local is not None and n_local == central.metrics.get("n_features")


def _shares(central: Run | None, local: Run) -> tuple[str, str]:
    """What the centralized and the local model each train on, in words."""
    if _horizontal(central, local):
        return "every agent's rows", "one agent's rows"
    return "all features", "the first party's features"


def collaboration_claim(ds: str, central: Run | None, local: Run) -> Claim:
    """The centralized model's test log loss is below the local one's, beyond Welch's half-width."""
    keys = ("test_logloss", "test_logloss_sd", "n_test")
    figure = PUBLISHED_COLLABORATION.get(ds)
    union, share = _shares(central, local)
    claim = dict(id=f"baselines-{ds}-collaboration-helps",
                 statement=f"{ds}: the centralized model ({union}) has lower test log loss than the local one "
                           f"({share})")
    if figure:
        claim.update(paper=ADMM_SHARING, kind=PAPER_CLAIM, source=f"ADMM sharing paper, Sec. 5 and {figure}",
                     published=f"{figure}: 'a significant performance boost' from the other party's features")
    else:
        claim.update(paper=PAPER, kind=DIAGNOSTIC, published="no paper publishes it for this dataset")
    why = _missing(central, keys) or _missing(local, keys)
    if why:
        return Claim(**claim, ours=why, verdict=NOT_CHECKED, margin="Welch t on the per-row log losses")
    c, lo = central.metrics, local.metrics
    est = stats.unpaired_summary(lo["test_logloss"], lo["test_logloss_sd"], lo["n_test"],
                                 c["test_logloss"], c["test_logloss_sd"], c["n_test"])
    verdict = stats.verdict(est.value, est.half_width, stats.GREATER)
    cause = POWER if verdict != "FAIL" else PROPERTY
    explanation = (f"the difference {est.value:+.2e} lies inside the unpaired half-width {est.half_width:.2e}; the "
                   "paired test on per-row losses (not recorded by the runs) would be tighter"
                   if cause == POWER else "the local model ends below the centralized one on these test rows")
    return Claim(**claim, ours=f"centralized {c['test_logloss']:.4f} vs local {lo['test_logloss']:.4f} "
                               f"(difference {est.value:+.2e})", verdict=verdict,
                 margin=f"{est.text}; the models share the test rows, so this bounds the paired half-width",
                 **why_not(verdict, cause, explanation + ".", TABLE, central.evidence, local.evidence))


def majority_claim(ds: str, central: Run | None) -> Claim:
    """Our check: the centralized model's test AUC is above the majority class's 0.5, beyond its sampling error."""
    claim = dict(id=f"baselines-{ds}-beats-majority-class", paper=PAPER, kind=DIAGNOSTIC,
                 statement=f"{ds}: the centralized model ranks the test rows better than the majority class "
                           "(test AUC above its 0.5)",
                 published="no paper states it: a classifier should beat predicting the majority class")
    why = _missing(central, ("test_auc", "test_majority_error", "n_test"))
    if why:
        return Claim(**claim, ours=why, verdict=NOT_CHECKED, margin="Hanley-McNeil SE of the test AUC")
    m = central.metrics
    auc, n = m["test_auc"], m["n_test"]
    minority = round(m["test_majority_error"] * n)
    if not 0 < minority < n:
        return Claim(**claim, ours=f"{central.name}: the test rows hold one class only", verdict=NOT_CHECKED)
    # which class is "positive" is not recorded here: take the larger of the two standard errors
    se = max(stats.auc_se(auc, minority, n - minority), stats.auc_se(auc, n - minority, minority))
    est = stats.against_published([auc], 0.5, se_published=0.0, se_metric=se)
    return Claim(**claim, ours=f"test AUC {auc:.4f} (error {m['test_error']:.4f} vs majority class "
                               f"{m['test_majority_error']:.4f})",
                 verdict=stats.verdict(est.value, est.half_width, stats.GREATER),
                 margin=f"±{est.half_width:.3g} = 1.96 × Hanley-McNeil SE {se:.3g} of the test AUC on {minority} + "
                        f"{n - minority} test rows (95 %; the majority class's 0.5 is exact)")


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
