"""Paillier quasi-Newton report: Table 1 of the FATE poster beside our encrypted runs, and their traffic.

Reads the runs of algorithms ``paillier_sgd`` and ``paillier_sqn`` on ``default_credit`` (Credit 1) and
``give_credit`` (Credit 2) with batch sizes 1000 and 3000, selected by their fields
(``Runs.one(algorithm=..., dataset=..., batch_size=..., encrypted=True)``), and the published Table 1 from
``published/paillier_sqn_table1.csv`` under the report root.

Outputs
-------
- ``tables/paillier_sqn_table1.md``: per cell the published value, ours and the deviation (epochs, loss, AUC),
  with seconds per run; then the traffic per iteration next to the poster's formulas, 3|S| + 2|S_H|/L
  ciphertexts between A and B and (2 + 1/L) n values with C (n = model coefficients); then, when
  plaintext-mode runs (``encrypted: false``) exist, their epochs over seeds.
- ``plots/data/paillier_sqn_loss.csv`` and ``plots/paillier_sqn_loss.png``: the decrypted epoch loss of every
  encrypted run, SGD against SQN per dataset and batch size.

Claims: in every (dataset, batch) row SQN needs fewer epochs than SGD; every run's loss is within
:data:`LOSS_TOL` and its AUC within :data:`AUC_TOL` of the published cell.

References
----------
K. Yang, T. Fan, T. Chen, Y. Shi, Q. Yang, "A Quasi-Newton Method Based Vertical Federated Learning Framework
for Logistic Regression", arXiv:1912.00513, 2019, Table 1.
"""

from __future__ import annotations

import csv
from typing import Any

from ppml.report.base import Claim, verdict_of, ReportOutput, Run, Runs, markdown_table

PAPER = "paillier_sqn"
PUBLISHED = ("published", "paillier_sqn_table1.csv")  # under the report root
DATASETS = {"default_credit": "Credit 1", "give_credit": "Credit 2"}
BATCHES = (1000, 3000)
METHODS = {"paillier_sgd": "SGD", "paillier_sqn": "SQN"}
LOSS_TOL = 0.005
AUC_TOL = 0.01


def _published(out: ReportOutput) -> dict[tuple[str, int, str], dict[str, Any]]:
    """Table 1 as printed, keyed by (dataset, batch size, method); empty when the file is absent."""
    path = out.root.joinpath(*PUBLISHED)
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["paper"] == PAPER]
    return {(r["dataset"], int(r["batch_size"]), r["method"]):
            {"epochs": int(r["epochs"]), "loss": float(r["loss"]), "auc": float(r["auc"]),
             "citation": r["citation"]}
            for r in rows}


def _runs(runs: Runs, *, encrypted: bool) -> dict[tuple[str, int, str], Run]:
    found = {}
    for dataset in DATASETS:
        for batch in BATCHES:
            for method in METHODS:
                run = runs.one(algorithm=method, dataset=dataset, batch_size=batch, encrypted=encrypted)
                if run is not None:
                    found[(dataset, batch, method)] = run
    return found


def _why_missing(run: Run | None) -> str:
    if run is None:
        return "not run: no such experiment in params.yaml"
    return str(run.metrics.get("status"))


def _deviation(ours: float | None, published: float | None) -> float | None:
    return None if ours is None or published is None else ours - published


def _count(value: float | None) -> str | None:
    """A count for display: whole numbers without decimals (metrics store means over seeds as floats)."""
    return None if value is None else f"{value:g}" if float(value).is_integer() else f"{value:.1f}"


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.0f}"


def _table1(table: dict, published: dict) -> str:
    header = ["dataset", "batch", "method", "epochs (pub.)", "epochs (ours)", "loss (pub.)", "loss (ours)",
              "Δ loss", "AUC (pub.)", "AUC (ours, test)", "Δ AUC", "AUC (ours, train)", "converged",
              "seconds", "run"]
    rows = []
    for dataset, name in DATASETS.items():
        for batch in BATCHES:
            for method, label in METHODS.items():
                pub = published.get((dataset, batch, method), {})
                run = table.get((dataset, batch, method))
                head = [name, batch, label, pub.get("epochs")]
                if run is None or not run.available:
                    rows.append(head + [_why_missing(run), pub.get("loss"), None, None, pub.get("auc"), None,
                                        None, None, None, None, run.name if run else None])
                    continue
                m = run.metrics
                rows.append(head + [_count(m.get("epochs")), pub.get("loss"), m.get("loss"),
                                    _deviation(m.get("loss"), pub.get("loss")), pub.get("auc"),
                                    m.get("test_auc"), _deviation(m.get("test_auc"), pub.get("auc")),
                                    m.get("train_auc"), m.get("converged"), _seconds(m.get("seconds")),
                                    run.name])
    return markdown_table(header, rows)


def _total_time(table: dict) -> str:
    """The summed wall time of the encrypted runs: the time Table 1 takes to reproduce."""
    done = [run for run in table.values() if run is not None and run.available]
    seconds = sum(run.metrics.get("seconds") or 0.0 for run in done)
    return (f"Time: the {len(done)} encrypted runs took {seconds:.0f} s ({seconds / 60:.1f} min) in total (the sum of "
            "their `seconds`: wall time of key generation, training and evaluation; loading the data excluded).")


def _settings(table: dict) -> str:
    """The parameters the encrypted runs share (or their spread), for the table's notes."""
    keys = ("eta", "decay", "lam", "tol", "max_epochs", "L", "M", "S_H", "key_bits", "scheme", "frac_bits",
            "shuffle", "host_squares", "update_at")
    parts = []
    for key in keys:
        values = sorted({repr(r.get(key)) for r in table.values() if r.available and key in r.metrics})
        if values:
            parts.append(f"{key} = {' / '.join(values)}")
    return "; ".join(parts) if parts else "no encrypted run available"


def _traffic(table: dict) -> str:
    # "|" would end a markdown cell: the formula's bars are escaped.
    header = ["dataset", "batch", "method", "A↔B ciphertexts / it. (ours)", r"3\|S\| + 2\|S_H\|/L (poster)",
              "A↔B kB / it.", "ciphertexts to C / it. (ours)", "values from C / it. (ours)",
              "(2 + 1/L) n (poster)", "C kB / it."]
    rows = []
    for (dataset, batch, method), run in sorted(table.items()):
        if not run.available:
            continue
        m = run.metrics
        rows.append([DATASETS[dataset], batch, METHODS[method],
                     _count(m.get("ab_ciphertexts_per_iteration")), _count(m.get("poster_ab_per_iteration")),
                     _count(m.get("ab_bytes_per_iteration", 0) / 1e3),
                     _count(m.get("arbiter_ciphertexts_per_iteration")), m.get("n_parameters"),
                     _count(m.get("poster_arbiter_per_iteration")),
                     _count(m.get("arbiter_bytes_per_iteration", 0) / 1e3)])
    if not rows:
        return "No encrypted run available."
    return markdown_table(header, rows)


def _plaintext(plain: dict) -> str | None:
    """Epochs (mean ± std over seeds) of the plaintext-mode runs, when there are any."""
    rows = []
    for (dataset, batch, method), run in sorted(plain.items()):
        if run.available:
            m = run.metrics
            rows.append([DATASETS[dataset], batch, METHODS[method], m.get("seeds"), _count(m.get("epochs")),
                         m.get("epochs_std"), m.get("loss"), m.get("test_auc"), run.name])
    if not rows:
        return None
    return markdown_table(["dataset", "batch", "method", "seeds", "epochs (mean)", "epochs (std)",
                           "loss (seed 0)", "test AUC (mean)", "run"], rows)


def _curves(table: dict, out: ReportOutput) -> None:
    import matplotlib.pyplot as plt

    rows = []
    fig, axes = plt.subplots(len(DATASETS), len(BATCHES), figsize=(9, 6.5), squeeze=False)
    for i, (dataset, name) in enumerate(DATASETS.items()):
        for j, batch in enumerate(BATCHES):
            ax = axes[i][j]
            for method, label in METHODS.items():
                run = table.get((dataset, batch, method))
                records = run.records() if run is not None else []
                rows += [{"dataset": dataset, "batch_size": batch, "method": label, "epoch": r["epoch"],
                          "loss": r["loss"]} for r in records]
                if records:
                    ax.plot([r["epoch"] for r in records], [r["loss"] for r in records], marker="o",
                            label=label)
            ax.set_title(f"{name}, |S| = {batch}")
            ax.set_xlabel("epoch")
            ax.set_ylabel("Taylor loss (decrypted)")
            if ax.has_data():
                ax.legend()
    fig.tight_layout()
    out.plot_data("paillier_sqn_loss", rows)
    out.figure("paillier_sqn_loss", fig)


def _claim(claim_id: str, statement: str, published: str, ours: str, passed: bool | None) -> Claim:
    return Claim(id=claim_id, paper=PAPER, statement=statement, published=published, ours=ours, verdict=verdict_of(passed))


def _claims(table: dict, published: dict) -> list[Claim]:
    claims = []
    for dataset, name in DATASETS.items():
        for batch in BATCHES:
            pub_sgd = published.get((dataset, batch, "paillier_sgd"), {}).get("epochs")
            pub_sqn = published.get((dataset, batch, "paillier_sqn"), {}).get("epochs")
            runs = [table.get((dataset, batch, method)) for method in METHODS]
            statement = f"{name}, |S| = {batch}: SQN converges in fewer epochs than SGD"
            claim_id = f"paillier_sqn-{dataset}-b{batch}-fewer-epochs"
            missing = [r for r in runs if r is None or not r.available]
            pub_text = f"SGD {pub_sgd} vs SQN {pub_sqn} epochs"
            if missing:
                claims.append(_claim(claim_id, statement, pub_text,
                                     "; ".join(_why_missing(r) for r in missing), None))
                continue
            sgd, sqn = (r.metrics for r in runs)
            ours = (f"SGD {_count(sgd['epochs'])} vs SQN {_count(sqn['epochs'])} epochs "
                    f"(converged: {sgd['converged']}, {sqn['converged']})")
            # SGD stopped by its epoch cap still took at least that many epochs; SQN must have converged.
            claims.append(_claim(claim_id, statement, pub_text, ours,
                                 bool(sqn["converged"] and sqn["epochs"] < sgd["epochs"])))
            for method, run in zip(METHODS, runs):
                pub = published.get((dataset, batch, method))
                statement = (f"{name}, |S| = {batch}, {METHODS[method]}: loss within {LOSS_TOL} and AUC "
                             f"within {AUC_TOL} of Table 1")
                claim_id = f"paillier_sqn-{dataset}-b{batch}-{method}-matches"
                if pub is None:
                    claims.append(_claim(claim_id, statement, "no published cell", "", None))
                    continue
                m = run.metrics
                d_loss, d_auc = m["loss"] - pub["loss"], m["test_auc"] - pub["auc"]
                claims.append(_claim(
                    claim_id, statement, f"loss {pub['loss']:.6f}, AUC {pub['auc']:.4f}",
                    f"loss {m['loss']:.6f} (Δ {d_loss:+.6f}), test AUC {m['test_auc']:.4f} (Δ {d_auc:+.4f})",
                    abs(d_loss) <= LOSS_TOL and abs(d_auc) <= AUC_TOL))
    return claims


NOTES = """\
Ours: the encrypted runs (`encrypted: true`) of `paillier_sgd` / `paillier_sqn`. Loss is the protocol's own
decrypted Taylor loss, log 2 − ½ y wᵀx + ⅛ (wᵀx)² plus λ/2‖w‖² (no penalty on the intercept), averaged over
the last epoch's mini-batches as FATE reports it; epochs count until FATE's rule |loss_e − loss_(e−1)| < tol.
AUC is measured on our held-out 20 % split (stratified, after PSI alignment); the poster does not say on which
rows its AUC was computed, so the training-set AUC is listed too. The poster gives neither its learning rate,
its L2 weight nor its memory M: ours are listed below. Settings: {settings}.
"""

TRAFFIC_NOTES = """\
Per iteration (mini-batch), measured on the network. Between A and B the poster counts 3|S| ciphertexts
([u_A], [u_A²] per row, [d]) plus 2|S_H| every L iterations ([X_A s_A], [h]); we add one ciphertext (A's
penalty term), and with `host_squares: sum` (FATE's code) A sends one ciphertext of Σu_A² instead of |S|.
With C the poster counts (2 + 1/L) n values with n the number of model coefficients (here the features plus
the intercept): n gradient ciphertexts up and n plaintext step values down per iteration, n Hessian-vector
ciphertexts up every L iterations; we also send one loss ciphertext per iteration.
"""


def build(runs: Runs, out: ReportOutput) -> list[Claim]:
    published = _published(out)
    table = _runs(runs, encrypted=True)
    parts = ["# Table 1 of the FATE quasi-Newton poster: encrypted SGD vs SQN", "",
             NOTES.format(settings=_settings(table)), _table1(table, published), "",
             _total_time(table), "",
             "## Communication per iteration", "", TRAFFIC_NOTES, _traffic(table)]
    plain = _plaintext(_runs(runs, encrypted=False))
    if plain is not None:
        parts += ["", "## Plaintext mode over seeds (same arithmetic, identity encryption)", "", plain]
    if not published:
        parts += ["", f"Published numbers not found ({'/'.join(PUBLISHED)} under the report root)."]
    out.table("paillier_sqn_table1", "\n".join(parts))
    _curves(table, out)
    return _claims(table, published)
