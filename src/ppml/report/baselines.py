"""The scikit-learn baselines of every dataset: centralized (all features / rows) and local (first party)."""

from __future__ import annotations

from ppml.report.base import Claim, ReportOutput, Runs, markdown_table

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
                passed=c < lo))
    out.table("baselines", "# Centralized and local baselines (scikit-learn, f = mean log loss + λ/2‖w‖²)\n\n"
              + markdown_table(["run", "dataset", "algorithm", "status", "train objective", "test log loss",
                                "test AUC", "test accuracy"], rows))
    return claims
