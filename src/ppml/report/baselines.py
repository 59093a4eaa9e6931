"""The scikit-learn baselines of every dataset: centralized (all features / rows) and local (first party)."""

from __future__ import annotations

from ppml.report.base import Claim, ReportOutput, Runs, markdown_table, verdict_of

PAPER = "baselines"


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
                rows.append([run.name, ds, run.get("algorithm"), m.get("status"), None, None, None, None])
                continue
            rows.append([run.name, ds, run.get("algorithm"), "ok", m.get("train_objective"), m.get("test_logloss"),
                         m.get("test_auc"), m.get("test_accuracy")])
        if central is not None and local is not None and central.available and local.available:
            c, lo = central.metrics["test_logloss"], local.metrics["test_logloss"]
            claims.append(Claim(
                id=f"baselines-{ds}-collaboration-helps", paper=PAPER,
                statement=f"{ds}: the centralized model (all features) has lower test log loss than the local one",
                published="implied by every paper's motivation", ours=f"centralized {c:.4f} vs local {lo:.4f}",
                verdict=verdict_of(c < lo)))
    _figure(runs, datasets, out)
    out.table("baselines", "# Centralized and local baselines (scikit-learn, f = mean log loss + λ/2‖w‖²)\n\n"
              + markdown_table(["run", "dataset", "algorithm", "status", "train objective", "test log loss",
                                "test AUC", "test accuracy"], rows))
    return claims


def _figure(runs: Runs, datasets: list[str], out: ReportOutput) -> None:
    """Test log loss of the centralized and local baselines per dataset (bar chart + DVC plot data)."""
    import matplotlib.pyplot as plt

    rows = []
    for ds in datasets:
        for algorithm in ("centralized", "local"):
            run = runs.one(algorithm=algorithm, dataset=ds)
            if run is not None and run.available:
                rows.append({"dataset": ds, "algorithm": algorithm, "test_logloss": run.metrics["test_logloss"]})
    out.plot_data("baselines_test_logloss", rows)
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
