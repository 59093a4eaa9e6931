"""PP-ADMM report: error versus epsilon (Fig. 5/7), training loss per iteration (Fig. 6), parameter studies
(Fig. 1-4), the privacy spent by the paper's bounds and by tight accounting, and the paper's claims.

Runs are recognized by their fields, not their names:

- the main grid: algorithm in :data:`ALGORITHMS`, no study parameter (:data:`STUDIES`) set in the experiment
  block; one run per (dataset, algorithm, epsilon), the non-private ``decentralized_admm`` one per dataset;
- a parameter study: a PP-ADMM or IPP-ADMM run whose block sets exactly one study parameter (``splits`` and
  ``beta`` for PP-ADMM, Fig. 1-2; ``C_loss`` and ``alpha`` for IPP-ADMM, Fig. 3-4).

Test errors are each run's mean over its seeds (``test_error_mean``, the agents' local models averaged, see
:mod:`ppml.algorithms.decentralized_admm`) with the standard deviation over seeds. The paper's numbers are
only plotted in its figures; they were not transcribed, so the claims compare our algorithms with each other
as the paper states them.

Outputs: ``tables/pp_admm_error.md``, ``tables/pp_admm_privacy.md``, ``tables/pp_admm_studies.md``; plot data
and figures ``pp_admm_error_vs_epsilon``, ``pp_admm_training_loss``, ``pp_admm_studies``.

References
----------
J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based Distributed
Machine Learning", CIKM 2020 (arXiv 2008.04500), Fig. 1-7 and Section 5.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from ppml.report.base import Claim, verdict_of, ReportOutput, Run, Runs, markdown_table

PAPER = "pp_admm"
NON_PRIVATE = "decentralized_admm"
#: Private algorithms in the paper's legend order, with their labels.
PRIVATE = {"pp_admm": "PP-ADMM", "ipp_admm": "IPP-ADMM", "dvp": "DVP", "m_admm": "M-ADMM", "r_admm": "R-ADMM"}
ALGORITHMS = {NON_PRIVATE: "non-private", **PRIVATE}
BASELINES = ("dvp", "m_admm", "r_admm")
#: Study parameter -> (algorithm studied, figure).
STUDIES = {"splits": ("pp_admm", "Fig. 1"), "beta": ("pp_admm", "Fig. 2"), "C_loss": ("ipp_admm", "Fig. 3"),
           "alpha": ("ipp_admm", "Fig. 4")}
#: The epsilons of the paper's Fig. 6 (training loss per iteration).
LOSS_CURVE_EPSILONS = (1.0, 2.0, 10.0)


def _error(run: Run) -> tuple[float, float]:
    """(mean, std) over seeds of the run's test error."""
    m = run.metrics
    return float(m.get("test_error_mean", m["test_error"])), float(m.get("test_error_std", 0.0))


def _grid(runs: Runs) -> tuple[dict[str, dict[str, dict[float, Run]]], dict[str, Run]]:
    """Main-grid runs: {dataset: {algorithm: {epsilon: run}}} and the non-private run per dataset."""
    grid: dict[str, dict[str, dict[float, Run]]] = defaultdict(lambda: defaultdict(dict))
    baseline: dict[str, Run] = {}
    for run in runs:
        algorithm = run.get("algorithm")
        if algorithm not in ALGORITHMS or any(k in run.params for k in STUDIES) or not run.available:
            continue
        dataset = run.get("dataset")
        if algorithm == NON_PRIVATE:
            if dataset in baseline:
                raise LookupError(f"two non-private runs for {dataset}: {baseline[dataset].name} and "
                                  f"{run.name}")
            baseline[dataset] = run
            continue
        epsilon = float(run.get("epsilon"))
        if epsilon in grid[dataset][algorithm]:
            raise LookupError(f"two {algorithm} runs for {dataset} at epsilon {epsilon}: "
                              f"{grid[dataset][algorithm][epsilon].name} and {run.name}")
        grid[dataset][algorithm][epsilon] = run
    return grid, baseline


def _studies(runs: Runs) -> dict[str, list[Run]]:
    """Study runs per study parameter."""
    out: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        keys = [k for k in STUDIES if k in run.params]
        if run.available and len(keys) == 1 and run.get("algorithm") == STUDIES[keys[0]][0]:
            out[keys[0]].append(run)
    return out


def _fmt(mean: float, std: float) -> str:
    return f"{mean:.4f} ± {std:.4f}"


def build(runs: Runs, out: ReportOutput) -> list[Claim]:
    """Tables, figures and claims of the PP-ADMM paper from whatever runs exist."""
    grid, baseline = _grid(runs)
    datasets = sorted(set(grid) | set(baseline))
    _error_table(grid, baseline, datasets, out)
    _privacy_table(grid, datasets, out)
    _loss_curves(grid, baseline, datasets, out)
    _study_outputs(_studies(runs), out)
    claims: list[Claim] = []
    for dataset in datasets or ["adult"]:
        claims.extend(_claims(dataset, grid.get(dataset, {}), baseline.get(dataset)))
    return claims


# ---------------------------------------------------------------------------------------------------------
# tables and figures


def _error_table(grid, baseline, datasets, out: ReportOutput) -> None:
    parts = ["# PP-ADMM (Ding et al., CIKM 2020): test error rate vs epsilon (Fig. 5/7)", "",
             "Mean ± std over seeds of the agents' local models' test error; delta = 1e-4, N = 5 agents, "
             "T = 30. The paper's values are only plotted (not transcribed)."]
    rows_csv: list[dict[str, Any]] = []
    import matplotlib.pyplot as plt

    panels = max(len(datasets), 1)
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        epsilons = sorted({e for alg in grid.get(dataset, {}).values() for e in alg})
        header = ["algorithm"] + [f"ε = {e:g}" for e in epsilons]
        rows = []
        if dataset in baseline:
            mean, std = _error(baseline[dataset])
            rows.append([ALGORITHMS[NON_PRIVATE]] + [_fmt(mean, std)] * len(epsilons))
            ax.axhline(mean, color="k", linestyle="--", label="non-private")
            rows_csv.append({"dataset": dataset, "algorithm": NON_PRIVATE, "epsilon": None,
                             "test_error": mean, "test_error_std": std})
        for algorithm, label in PRIVATE.items():
            by_eps = grid.get(dataset, {}).get(algorithm, {})
            if not by_eps:
                continue
            rows.append([label] + [_fmt(*_error(by_eps[e])) if e in by_eps else "—" for e in epsilons])
            xs = sorted(by_eps)
            means, stds = zip(*(_error(by_eps[e]) for e in xs))
            ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=label)
            rows_csv.extend({"dataset": dataset, "algorithm": algorithm, "epsilon": e, "test_error": m,
                             "test_error_std": s} for e, m, s in zip(xs, means, stds))
        parts += ["", f"## {dataset}", "", markdown_table(header, rows)]
        ax.set(xscale="log", xlabel="ε", ylabel="test error rate", title=dataset)
        ax.legend(fontsize=8)
    if not datasets:
        parts += ["", "No runs available."]
    out.table("pp_admm_error", "\n".join(parts))
    out.plot_data("pp_admm_error_vs_epsilon", rows_csv)
    out.figure("pp_admm_error_vs_epsilon", fig)


def _privacy_table(grid, datasets, out: ReportOutput) -> None:
    header = ["dataset", "algorithm", "target ε", "paper bound ε", "paper ρ → CKS ε", "tight ε (method)",
              "status"]
    rows = []
    for dataset in datasets:
        for algorithm, label in PRIVATE.items():
            for epsilon, run in sorted(grid.get(dataset, {}).get(algorithm, {}).items()):
                privacy = run.privacy or {}
                paper, tight = privacy.get("paper") or {}, privacy.get("tight") or {}
                rows.append([dataset, label, epsilon, paper.get("epsilon"), paper.get("epsilon_cks"),
                             f"{tight['epsilon']:.4f} ({tight.get('method')})" if tight else None,
                             privacy.get("status", "not accounted")])
    out.table("pp_admm_privacy", "# PP-ADMM family: privacy spent per run (δ = 1e-4)\n\n"
              "The paper's own bound (zCDP, ε = ρ + 2√(ρ ln 1/δ)), the same ρ by the Canonne-Kamath-Steinke "
              "conversion, and the tight RDP/PLD accounting of the recorded noise.\n\n"
              + markdown_table(header, rows))


def _mean_curve(run: Run, key: str) -> list[float]:
    """Per-round `key` averaged over the run's seeds."""
    seeds = [run.records(s) for s in range(len((run.history or {}).get("runs") or []))]
    curves = [[r[key] for r in recs if r.get(key) is not None] for recs in seeds if recs]
    if not curves:
        return []
    length = min(len(c) for c in curves)
    return np.mean([c[:length] for c in curves], axis=0).tolist()


def _loss_curves(grid, baseline, datasets, out: ReportOutput) -> None:
    import matplotlib.pyplot as plt

    rows: list[dict[str, Any]] = []
    panels = [(d, e) for d in datasets for e in LOSS_CURVE_EPSILONS]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.5 * max(len(panels), 1), 3.6), squeeze=False)
    for ax, (dataset, epsilon) in zip(axes[0], panels):
        candidates = [(ALGORITHMS[NON_PRIVATE], NON_PRIVATE, baseline.get(dataset))]
        candidates += [(label, a, grid.get(dataset, {}).get(a, {}).get(epsilon))
                       for a, label in PRIVATE.items()]
        for label, algorithm, run in candidates:
            curve = _mean_curve(run, "train_loss") if run is not None else []
            if not curve:
                continue
            ax.plot(range(1, len(curve) + 1), curve, label=label)
            rows.extend({"dataset": dataset, "epsilon": epsilon, "algorithm": algorithm, "iteration": i + 1,
                         "train_loss": v} for i, v in enumerate(curve))
        # the private baselines' losses can be orders of magnitude above the others'
        ax.set(xlabel="iteration", ylabel="average training loss", title=f"{dataset}, ε = {epsilon:g}",
               yscale="log")
        ax.legend(fontsize=7)
    out.plot_data("pp_admm_training_loss", rows)
    out.figure("pp_admm_training_loss", fig)


def _study_outputs(studies: dict[str, list[Run]], out: ReportOutput) -> None:
    import matplotlib.pyplot as plt

    parts = ["# PP-ADMM and IPP-ADMM parameter studies (Fig. 1-4)", "",
             "Test error (mean ± std over seeds) against one parameter, the others at the paper's values."]
    rows_csv: list[dict[str, Any]] = []
    fig, axes = plt.subplots(1, len(STUDIES), figsize=(4.5 * len(STUDIES), 3.6), squeeze=False)
    for ax, (key, (algorithm, figure)) in zip(axes[0], STUDIES.items()):
        by_eps: dict[float, list[tuple[float, float, float]]] = defaultdict(list)
        for run in studies.get(key, []):
            by_eps[float(run.get("epsilon"))].append((float(run.get(key)), *_error(run)))
        table_rows = []
        for epsilon, points in sorted(by_eps.items()):
            points.sort()
            xs, means, stds = zip(*points)
            ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=f"ε = {epsilon:g}")
            table_rows += [[f"{x:g}", epsilon, _fmt(m, s)] for x, m, s in points]
            rows_csv += [{"parameter": key, "algorithm": algorithm, "value": x, "epsilon": epsilon,
                          "test_error": m, "test_error_std": s} for x, m, s in points]
        table = markdown_table([key, "ε", "test error"], table_rows) if table_rows else "No runs available."
        parts += ["", f"## {figure}: {PRIVATE[algorithm]}, {key}", "", table]
        finite = [x for pts in by_eps.values() for x, _, _ in pts if math.isfinite(x) and x > 0]
        if finite and max(finite) / min(finite) > 50:
            ax.set_xscale("log")
        ax.set(xlabel=key, ylabel="test error rate", title=f"{figure}: {PRIVATE[algorithm]}")
        if by_eps:
            ax.legend(fontsize=7)
    out.table("pp_admm_studies", "\n".join(parts))
    out.plot_data("pp_admm_studies", rows_csv)
    out.figure("pp_admm_studies", fig)


# ---------------------------------------------------------------------------------------------------------
# claims


def _claim(dataset: str, suffix: str, statement: str, published: str, ours: str,
           passed: bool | None) -> Claim:
    return Claim(id=f"{PAPER}-{dataset}-{suffix}", paper=PAPER, statement=f"{dataset}: {statement}",
                 published=published, ours=ours, verdict=verdict_of(passed))


def _missing(algorithms: dict[str, dict[float, Run]], needed: tuple[str, ...]) -> str | None:
    absent = [PRIVATE[a] for a in needed if not algorithms.get(a)]
    return f"not checked: no runs of {', '.join(absent)}" if absent else None


def _claims(dataset: str, algorithms: dict[str, dict[float, Run]], baseline: Run | None) -> list[Claim]:
    claims = []
    # 1. error falls as epsilon grows (each private algorithm)
    reason = _missing(algorithms, tuple(PRIVATE))
    statement = "every private algorithm's test error falls (never rises) as ε grows"
    if reason:
        claims.append(_claim(dataset, "error-falls-with-epsilon", statement, "Fig. 5/7", reason, None))
    else:
        verdicts, notes = [], []
        for algorithm, label in PRIVATE.items():
            eps = sorted(algorithms[algorithm])
            errors = [_error(algorithms[algorithm][e])[0] for e in eps]
            falls = errors[-1] < errors[0] and all(b <= a for a, b in zip(errors, errors[1:]))
            verdicts.append(falls)
            notes.append(f"{label} " + " → ".join(f"{x:.4f}" for x in errors))
        claims.append(_claim(dataset, "error-falls-with-epsilon", statement, "Fig. 5/7", "; ".join(notes),
                             all(verdicts)))
    # 2-3. PP-ADMM and IPP-ADMM at or below every baseline at every epsilon
    for ours_alg in ("pp_admm", "ipp_admm"):
        suffix = f"{ours_alg.replace('_', '-')}-beats-baselines"
        statement = f"{PRIVATE[ours_alg]}'s test error is at or below DVP's, M-ADMM's and R-ADMM's at every ε"
        reason = _missing(algorithms, (ours_alg, *BASELINES))
        if reason:
            claims.append(_claim(dataset, suffix, statement, "Fig. 5/7", reason, None))
            continue
        common = sorted(set(algorithms[ours_alg]).intersection(*(algorithms[b] for b in BASELINES)))
        worse = []
        for e in common:
            mine = _error(algorithms[ours_alg][e])[0]
            best = min(_error(algorithms[b][e])[0] for b in BASELINES)
            if mine > best:
                worse.append(f"ε = {e:g}: {mine:.4f} > {best:.4f}")
        ours = "at or below at every ε" if not worse else "; ".join(worse)
        checked = ", ".join(f"{e:g}" for e in common)
        claims.append(_claim(dataset, suffix, statement, "Fig. 5/7", f"{ours} (ε checked: {checked})",
                             not worse if common else None))
    # 4. IPP-ADMM at or below PP-ADMM
    reason = _missing(algorithms, ("pp_admm", "ipp_admm"))
    statement = "IPP-ADMM's test error is at or below PP-ADMM's at every ε"
    if reason:
        claims.append(_claim(dataset, "ipp-at-most-pp", statement, "Fig. 5/7", reason, None))
    else:
        common = sorted(set(algorithms["pp_admm"]) & set(algorithms["ipp_admm"]))
        pairs = [(e, _error(algorithms["ipp_admm"][e])[0], _error(algorithms["pp_admm"][e])[0])
                 for e in common]
        ours = "; ".join(f"ε = {e:g}: IPP {i:.4f} vs PP {p:.4f}" for e, i, p in pairs)
        claims.append(_claim(dataset, "ipp-at-most-pp", statement, "Fig. 5/7", ours,
                             all(i <= p for _, i, p in pairs) if pairs else None))
    # 5. the non-private run bounds every private one from below
    statement = "the non-private decentralized ADMM's test error is at or below every private algorithm's"
    if baseline is None or not any(algorithms.values()):
        claims.append(_claim(dataset, "non-private-lower-bound", statement, "Fig. 5/7",
                             "not checked: the non-private run or the private runs are missing", None))
    else:
        floor = _error(baseline)[0]
        below = [(PRIVATE[a], e, _error(r)[0]) for a, by_eps in algorithms.items() for e, r in by_eps.items()
                 if _error(r)[0] < floor]
        ours = f"non-private {floor:.4f}; " + ("no private run below it" if not below else
                                               "below it: " + ", ".join(f"{a} at ε = {e:g} ({x:.4f})"
                                                                        for a, e, x in below))
        claims.append(_claim(dataset, "non-private-lower-bound", statement, "Fig. 5/7", ours, not below))
    return claims
