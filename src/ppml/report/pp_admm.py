"""PP-ADMM report: error versus epsilon (Fig. 5/7), the epsilon needed for a given error (Fig. 5), training
loss per iteration (Fig. 6), parameter studies (Fig. 1-4), the units of eta and beta, the epsilon-split
ablation, the privacy spent by the paper's bounds and by tight accounting, and the paper's claims.

Runs are recognized by their fields, not their names:

- the main grid: algorithm in :data:`ALGORITHMS`, no study parameter (:data:`STUDIES`) and no ablation key
  (:data:`ABLATION_KEYS`) set in the experiment block; one run per (dataset, algorithm, epsilon), the
  non-private ``decentralized_admm`` one per dataset;
- a parameter study: a PP-ADMM or IPP-ADMM run whose block sets exactly one study parameter (``splits`` and
  ``beta`` for PP-ADMM, Fig. 1-2; ``C_loss`` and ``alpha`` for IPP-ADMM, Fig. 3-4);
- the units of eta and beta: noise-off PP-ADMM runs with a fixed lam_hat (``noise: false``,
  ``lam_hat_rule: lam``), on either reading (``variant: paper`` or ``literal``), and every
  ``variant: literal`` run beside the paper variant's run at the same epsilon;
- the epsilon-split ablation: PP-ADMM runs that set ``eps3_ratio`` or fix lam_hat with the noise on, beside
  the main grid's runs (eps3_ratio = 0.99); the decomposition: runs named ``*-decomp-*``.

Test errors are each run's mean over its seeds with the standard deviation over seeds, of two models: the
agents' own models (``test_error``, each agent's model on every test row, averaged over agents: the measure of
the claims) and the average of the agents' models (``test_error_average_model``, read per seed from the run's
history), beside the majority-class error. The paper's numbers are only plotted in its figures; they were not
transcribed, so the claims compare our algorithms with each other as the paper states them.

Outputs: ``tables/pp_admm_error.md`` (with the epsilon needed for a given error),
``tables/pp_admm_privacy.md``, ``tables/pp_admm_studies.md``, ``tables/pp_admm_units.md``,
``tables/pp_admm_eps_split.md``, ``tables/pp_admm_decomposition.md``, ``tables/pp_admm_baselines_check.md``
(DVP/M-ADMM/R-ADMM at the largest ε beside their noise-off twins: method or reconstruction); plot data and
figures ``pp_admm_error_vs_epsilon``, ``pp_admm_training_loss``, ``pp_admm_studies``.

Claims: per algorithm and ε, "beats the majority class"; and the spec's claims 1-7 (``claim1-`` … ``claim7-``
ids). Each comparison has a margin, max(2 × the seed standard error of the difference, 0.005) (claim 4's send
counts: 0.5 sends per agent floor; claim 7's "close" is our reading, within 0.01 of the better of the
non-private decentralized ADMM and ``centralized-<dataset>``). A claim with several parts (per ε, per
algorithm) is FAIL if any part fails, NOT SHOWN if any part is inside its margin.

References
----------
J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based Distributed
Machine Learning", CIKM 2020 (arXiv 2008.04500), Fig. 1-7 and Section 5.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from ppml.report.base import (FAIL, NOT_CHECKED, NOT_SHOWN, PASS, Claim, ReportOutput, Run, Runs, compare,
                              markdown_table, verdict_of)

PAPER = "pp_admm"
NON_PRIVATE = "decentralized_admm"
#: Private algorithms in the paper's legend order, with their labels.
PRIVATE = {"pp_admm": "PP-ADMM", "ipp_admm": "IPP-ADMM", "dvp": "DVP", "m_admm": "M-ADMM", "r_admm": "R-ADMM"}
ALGORITHMS = {NON_PRIVATE: "non-private", **PRIVATE}
BASELINES = ("dvp", "m_admm", "r_admm")
#: Study parameter -> (algorithm studied, figure).
STUDIES = {"splits": ("pp_admm", "Fig. 1"), "beta": ("pp_admm", "Fig. 2"), "C_loss": ("ipp_admm", "Fig. 3"),
           "alpha": ("ipp_admm", "Fig. 4")}
#: Keys that mark a run as an ablation (decomposition study or variant), never part of the main grid.
ABLATION_KEYS = ("noise", "lam_hat_rule", "eps3_ratio", "variant", "loss_scale", "calibration",
                 "svt_sensitivity")
#: The epsilons of the paper's Fig. 6 (training loss per iteration).
LOSS_CURVE_EPSILONS = (1.0, 2.0, 10.0)
#: How far above the non-private error the targets of "ε needed for a given error" (Fig. 5) lie.
TARGET_GAPS = (0.01, 0.02, 0.04, 0.06)
#: The two models whose test error every table shows: the agents' own (the claims' measure) and their average.
MODELS = {"agents": "agents' own models", "average": "average model"}
#: What a run's reading of eta and beta is called in the tables.
SUMMED, MEAN = "summed loss Σ_{x∈D_i}", "mean loss (1/|D_i|) Σ_{x∈D_i}"
NOT_PRIVATE = "**not a privacy guarantee**"
#: The units table's labels of the two readings (the literal one as the runs' ledgers and metrics name it).
READING_LABELS = {SUMMED: "η and β read on the summed loss (`variant: paper`)",
                  MEAN: "η and β read on the mean-loss scale as printed (`variant: literal`)"}


def _error(run: Run) -> tuple[float, float]:
    """(mean, std) over seeds of the run's test error (the agents' own models)."""
    m = run.metrics
    return float(m.get("test_error_mean", m.get("test_error"))), float(m.get("test_error_std", 0.0) or 0.0)


def _seed_finals(run: Run, key: str) -> list[float]:
    """A final metric of every seed of the run, from its history (empty when the history lacks it)."""
    finals = [s.get("final") or {} for s in ((run.history or {}).get("runs") or [])]
    return [float(f[key]) for f in finals if f.get(key) is not None]


def _average_error(run: Run) -> tuple[float, float] | None:
    """(mean, std) over seeds of the average model's test error; None when the run does not record it."""
    values = _seed_finals(run, "test_error_average_model")
    if not values:
        value = run.metrics.get("test_error_average_model")
        return None if value is None else (float(value), 0.0)
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _model_error(run: Run, model: str) -> tuple[float, float] | None:
    return _error(run) if model == "agents" else _average_error(run)


def _grid(runs: Runs) -> tuple[dict[str, dict[str, dict[float, Run]]], dict[str, Run]]:
    """Main-grid runs: {dataset: {algorithm: {epsilon: run}}} and the non-private run per dataset."""
    grid: dict[str, dict[str, dict[float, Run]]] = defaultdict(lambda: defaultdict(dict))
    baseline: dict[str, Run] = {}
    for run in runs:
        algorithm = run.get("algorithm")
        if (algorithm not in ALGORITHMS or any(k in run.params for k in (*STUDIES, *ABLATION_KEYS))
                or not run.available):
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
        if "splits" in keys:  # Fig. 1 fixes beta = 1e-6 beside the split
            keys = ["splits"]
        if any(k in run.params for k in ABLATION_KEYS):
            continue
        if run.available and len(keys) == 1 and run.get("algorithm") == STUDIES[keys[0]][0]:
            out[keys[0]].append(run)
    return out


def _centralized(runs: Runs, dataset: str) -> Run | None:
    """The centralized baseline of the dataset (experiment ``centralized-<dataset>``), if it ran."""
    run = runs.get(f"centralized-{dataset}")
    return run if run is not None and run.available else None


def _majority(runs) -> float | None:
    """The majority-class test error recorded by the runs (all runs of a dataset share it)."""
    values = {round(float(r.metrics["majority_error"]), 12) for r in runs
              if r is not None and r.available and r.metrics.get("majority_error") is not None}
    return max(values) if values else None


def _fmt(mean: float, std: float) -> str:
    return f"{mean:.4f} ± {std:.4f}"


def _cell(value: tuple[float, float] | None) -> str:
    return "—" if value is None else _fmt(*value)


def _reading(run: Run) -> str:
    """The loss scale a run's eta (and beta) act on: summed or mean (see the algorithms' docstrings)."""
    algorithm = run.get("algorithm")
    if algorithm in ("pp_admm", "ipp_admm"):
        variant = run.get("variant") or "paper"
        if variant != "reconstructed":
            return SUMMED if variant == "paper" else MEAN
        return SUMMED if run.get("loss_scale") == "sum" else MEAN
    return MEAN if run.get("loss_scale") == "mean" else SUMMED


def _scale_header(runs: Iterable[Run]) -> str:
    """One sentence on the scale of every row (stated once per table)."""
    by_reading: dict[str, list[str]] = defaultdict(list)
    for run in runs:
        label = ALGORITHMS.get(run.get("algorithm"), run.get("algorithm"))
        if label not in by_reading[_reading(run)]:
            by_reading[_reading(run)].append(label)
    if len(by_reading) == 1:
        (reading, labels), = by_reading.items()
        return (f"Every row runs on one scale: each agent's {reading} loss with the ADMM penalty η (and PP's "
                "and "
                f"IPP's tolerance β) on it ({', '.join(labels)}; PP-ADMM and IPP-ADMM `variant: paper`, the "
                "others `loss_scale: sum`).")
    parts = [f"{reading} loss: {', '.join(labels)}" for reading, labels in sorted(by_reading.items())]
    return "The rows run on different scales (" + "; ".join(parts) + "): their errors are not comparable."


def build(runs: Runs, out: ReportOutput) -> list[Claim]:
    """Tables, figures and claims of the PP-ADMM paper from whatever runs exist."""
    grid, baseline = _grid(runs)
    datasets = sorted(set(grid) | set(baseline))
    studies = _studies(runs)
    _error_table(grid, baseline, datasets, out)
    _privacy_table(grid, datasets, out)
    _loss_curves(grid, baseline, datasets, out)
    _study_outputs(studies, out, _majority(list(runs)))
    _units_table(runs, out)
    _eps_split_table(runs, grid, out)
    _decomposition(runs, out)
    _baselines_check(grid, runs, out)
    claims: list[Claim] = []
    for dataset in datasets or ["adult"]:
        claims.extend(_claims(dataset, grid.get(dataset, {}), baseline.get(dataset),
                              {k: [r for r in v if r.get("dataset") == dataset] for k, v in studies.items()},
                              _centralized(runs, dataset)))
    return claims


# ---------------------------------------------------------------------------------------------------------
# tables and figures


def _error_table(grid, baseline, datasets, out: ReportOutput) -> None:
    parts = ["# PP-ADMM (Ding et al., CIKM 2020): test error rate vs epsilon (Fig. 5/7)", "",
             "Mean ± std over seeds of the test error of the agents' own models (each agent's model on every "
             "test row, averaged over agents: the measure of the claims) and of the average of the agents' "
             "models, beside the majority class; delta = 1e-4, N = 5 agents, T = 30. The paper's values are "
             "only plotted (not transcribed)."]
    rows_csv: list[dict[str, Any]] = []
    import matplotlib.pyplot as plt

    panels = max(len(datasets), 1)
    fig, axes = plt.subplots(1, 2 * panels, figsize=(5.5 * 2 * panels, 4), squeeze=False)
    for d, dataset in enumerate(datasets):
        by_alg = grid.get(dataset, {})
        epsilons = sorted({e for alg in by_alg.values() for e in alg})
        runs_here = [r for alg in by_alg.values() for r in alg.values()]
        runs_here += [baseline[dataset]] if dataset in baseline else []
        majority = _majority(runs_here)
        parts += ["", f"## {dataset}", "", _scale_header(runs_here)]
        if majority is not None:
            rows_csv.append({"dataset": dataset, "algorithm": "majority_class", "model": "", "epsilon": None,
                             "test_error": majority, "test_error_std": 0.0})
        for m, (model, model_label) in enumerate(MODELS.items()):
            ax = axes[0][2 * d + m]
            header = ["algorithm"] + [f"ε = {e:g}" for e in epsilons]
            rows = []
            if majority is not None:
                rows.append(["majority class"] + [f"{majority:.4f}"] * len(epsilons))
                ax.axhline(majority, color="grey", linestyle=":", label="majority class")
            if dataset in baseline:
                value = _model_error(baseline[dataset], model)
                rows.append([ALGORITHMS[NON_PRIVATE]] + [_cell(value)] * len(epsilons))
                if value is not None:
                    ax.axhline(value[0], color="k", linestyle="--", label="non-private")
                    rows_csv.append({"dataset": dataset, "algorithm": NON_PRIVATE, "model": model,
                                     "epsilon": None, "test_error": value[0], "test_error_std": value[1]})
            for algorithm, label in PRIVATE.items():
                by_eps = by_alg.get(algorithm, {})
                if not by_eps:
                    continue
                values = {e: _model_error(r, model) for e, r in by_eps.items()}
                rows.append([label] + [_cell(values.get(e)) for e in epsilons])
                points = [(e, *values[e]) for e in sorted(values) if values[e] is not None]
                if points:
                    xs, means, stds = zip(*points)
                    ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=label)
                rows_csv.extend({"dataset": dataset, "algorithm": algorithm, "model": model, "epsilon": e,
                                 "test_error": mean, "test_error_std": std} for e, mean, std in points)
            parts += ["", f"### {model_label}", "", markdown_table(header, rows)]
            ax.set(xscale="log", xlabel="ε", ylabel="test error rate", title=f"{dataset}: {model_label}")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        parts += _epsilon_needed(dataset, by_alg, baseline.get(dataset), majority)
    if not datasets:
        parts += ["", "No runs available."]
    out.table("pp_admm_error", "\n".join(parts))
    out.plot_data("pp_admm_error_vs_epsilon", rows_csv, series=("algorithm", "model"))
    out.figure("pp_admm_error_vs_epsilon", fig)


def _epsilon_needed(dataset: str, by_alg: dict[str, dict[float, Run]], baseline: Run | None,
                    majority: float | None) -> list[str]:
    """Fig. 5's view of the grid: the smallest ε of the grid at which each algorithm's error (agents' own
    models) is at most a target, for targets just above the non-private error."""
    if baseline is None or not by_alg:
        return []
    floor = _error(baseline)[0]
    targets = [floor + gap for gap in TARGET_GAPS if majority is None or floor + gap < majority]
    if not targets:
        return []
    rows = []
    for algorithm, label in PRIVATE.items():
        by_eps = by_alg.get(algorithm, {})
        if not by_eps:
            continue
        cells = []
        for target in targets:
            reached = [e for e, r in sorted(by_eps.items()) if _error(r)[0] <= target]
            cells.append(f"{reached[0]:g}" if reached else f"> {max(by_eps):g}")
        rows.append([label] + cells)
    header = ["algorithm"] + [f"error ≤ {t:.3f}" for t in targets]
    return ["", f"### ε needed for a given error (Fig. 5), {dataset}", "",
            f"The smallest ε of the grid at which the agents' own models' mean test error is at most the "
            f"target; targets lie {', '.join(f'{g:g}' for g in TARGET_GAPS)} above the non-private error "
            f"({floor:.4f}), below the majority class.", "", markdown_table(header, rows)]


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
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    out.plot_data("pp_admm_training_loss", rows, series=("epsilon", "algorithm"))
    out.figure("pp_admm_training_loss", fig)


def _error_columns(run: Run) -> list[str]:
    """The two models' errors and the majority class, as table cells."""
    majority = run.metrics.get("majority_error")
    return [_fmt(*_error(run)), _cell(_average_error(run)),
            "—" if majority is None else f"{float(majority):.4f}"]


ERROR_HEADER = [MODELS["agents"], MODELS["average"], "majority class"]


def _per_agent(run: Run, key: str) -> float | None:
    """A calibration value of the run's first agent in its first seed (history ``extra.agents``)."""
    seeds = (run.history or {}).get("runs") or []
    agents = ((seeds[0].get("extra") or {}).get("agents") or {}) if seeds else {}
    first = next(iter(agents.values()), {})
    return first.get(key)


def _units_table(runs: Runs, out: ReportOutput) -> None:
    """The evidence for reading eta and beta on the summed loss: noise-off runs with a fixed lam_hat over
    eta on the mean scale, the summed reading at the printed eta among them, and both readings with the
    noise on."""
    sweep, private = [], []
    for run in runs:
        if run.get("algorithm") not in ("pp_admm", "ipp_admm") or not run.available:
            continue
        fixed = run.get("lam_hat_rule") == "lam"
        if run.get("algorithm") == "pp_admm" and run.get("noise") is False and fixed:
            sweep.append(run)
        elif run.get("variant") == "literal" and run.get("noise", True) and not fixed:
            private.append(run)
    header = ["reading", "η as set", "η on the mean scale", "λ̂/N", *ERROR_HEADER]

    def row(run: Run) -> tuple[float, list[str]]:
        eta = float(run.get("eta", 0.5))
        scale = float(_per_agent(run, "scale") or 1.0)
        reading = READING_LABELS[_reading(run)]
        lam = run.metrics.get("lam_hat")
        return eta / scale, [reading, f"{eta:g}", f"{eta / scale:.3g}",
                             "—" if lam is None else f"{float(lam):.4g}", *_error_columns(run)]

    parts = ["# Units of η and β: the mean-loss and the summed-loss readings", "",
             "The paper prints η = 0.5 and β = 10^-3.5 beside a mean-loss objective. On that scale each "
             "round is a proximal step of about 1/(2η|B_i|) against a curvature of 0.01 or less in most "
             "directions, so the iterates barely move in T = 30 rounds. Read on the agent's summed loss "
             "(η/|D_i| and β/|D_i| on the mean scale; the same iterates, pinned by a test), the printed "
             "values work. Test error (mean ± std over seeds)."]
    if sweep:
        parts += ["", "## Noise off, λ̂ fixed, T = 30: test error against η", "",
                  markdown_table(header, [r for _, r in sorted((row(run) for run in sweep),
                                                               key=lambda x: -x[0])])]
    pairs = []
    for run in private:
        twin = next((r for r in runs if r.available and r.get("algorithm") == run.get("algorithm")
                     and r.get("dataset") == run.get("dataset") and r.get("epsilon") == run.get("epsilon")
                     and not any(k in r.params for k in (*STUDIES, *ABLATION_KEYS))), None)
        for r in (twin, run):
            if r is not None:
                pairs.append([PRIVATE[r.get("algorithm")], f"{float(r.get('epsilon')):g}", *row(r)[1]])
    if pairs:
        parts += ["", "## With the noise, line 3's λ̂: the two readings at the same ε (same budget and σ_i1)",
                  "",
                  markdown_table(["algorithm", "ε", *header], pairs)]
    if not (sweep or pairs):
        parts += ["", "No runs available."]
    out.table("pp_admm_units", "\n".join(parts))


def _eps_split_table(runs: Runs, grid, out: ReportOutput) -> None:
    """The epsilon-split ablation: how much of epsilon_i1 line 3 takes, and a fixed lam_hat (not private)."""
    ablation = [r for r in runs if r.get("algorithm") == "pp_admm" and r.available and r.get("noise", True)
                and "-decomp-" not in r.name and r.get("variant", "paper") == "paper"
                and ("eps3_ratio" in r.params or r.params.get("lam_hat_rule") == "lam")
                and not any(k in r.params for k in STUDIES)]
    rows = []
    for dataset in sorted({r.get("dataset") for r in ablation}):
        epsilons = {float(r.get("epsilon")) for r in ablation if r.get("dataset") == dataset}
        main = [r for e, r in grid.get(dataset, {}).get("pp_admm", {}).items() if e in epsilons]
        for run in sorted([*main, *(r for r in ablation if r.get("dataset") == dataset)],
                          key=lambda r: (float(r.get("epsilon")), r.params.get("lam_hat_rule") == "lam",
                                         -float(r.get("eps3_ratio", 0.99)))):
            fixed = run.get("lam_hat_rule") == "lam"
            privacy = run.privacy or {}
            if fixed or privacy.get("certified") is False:
                status = NOT_PRIVATE
            elif privacy.get("certified"):
                bound = float((privacy.get("paper") or {}).get("epsilon"))
                status = f"certified (paper bound ε = {bound:.3g})"
                if privacy.get("allow_large_delta"):  # the account stage's caveat, carried into the table
                    status += ", but δ may be ≥ 1/n (allow_large_delta: true)"
            else:
                status = "certified by the ledger (not accounted here)"
            lam = run.metrics.get("lam_hat")
            rows.append([dataset, f"{float(run.get('epsilon')):g}",
                         "fixed λ̂" if fixed else f"{float(run.get('eps3_ratio', 0.99)):g}",
                         "—" if lam is None else f"{float(lam):.4g}", status, *_error_columns(run)])
    text = ("# PP-ADMM (paper variant): the ε split and line 3\n\n"
            "Line 3 sets λ̂ ≥ 2.8 N c1 / ((ε_i1 − ε_i3)|D_i|): the smaller the share of ε_i1 left to it "
            "(ε_i3/ε_i1 = 0.99 in the paper), the larger λ̂. At small ε this regularizer alone pulls the "
            "model toward zero, close to the majority class, whatever the noise. Rows: ε_i3/ε_i1 = 0.99 (the "
            "main grid), 0.9 and 0.5 (all certified), and a fixed λ̂ below line 3's value, which is "
            + NOT_PRIVATE + " (the ledger certifies nothing; it shows what the noise alone costs).\n\n")
    text += (markdown_table(["dataset", "ε", "ε_i3/ε_i1", "λ̂/N", "privacy", *ERROR_HEADER], rows) if rows
             else "No runs available.")
    out.table("pp_admm_eps_split", text)


def _decomposition(runs: Runs, out: ReportOutput) -> None:
    """Where the error comes from: runs named ``*-decomp-*`` (regularizer alone, noise alone, optimizer)."""
    rows = []
    for run in runs:
        if "-decomp-" not in run.name or not run.available:
            continue
        lam = run.metrics.get("lam_hat")
        rows.append([run.name.split("-decomp-")[1], run.get("epsilon"), run.get("noise", True),
                     run.get("lam_hat_rule", "line3"), "—" if lam is None else f"{float(lam):.4g}",
                     *_error_columns(run)])
    table = (markdown_table(["what", "ε", "noise", "λ̂ rule", "λ̂/N", *ERROR_HEADER], sorted(rows, key=str))
             if rows else "No runs available.")
    out.table("pp_admm_decomposition",
              "# PP-ADMM (paper variant, η and β on the summed loss): where the error comes from\n\n"
              "lamhat = noise off, λ̂ as line 3 sets it at ε (the regularizer alone); noise = full noise "
              "with λ̂/N fixed small (" + NOT_PRIVATE + "); optimizer = noise off, λ̂/N small (what the ADMM "
              "with η = 0.5 on the summed loss reaches in T = 30 rounds).\n\n" + table)


def _baselines_check(grid, runs: Runs, out: ReportOutput) -> None:
    """Issue 11 "Baselines": where DVP, M-ADMM or R-ADMM is not below the majority class at the largest ε, is it
    the method's noise or our reconstruction? Compares each run with its noise-off twin (block ``noise: false``
    at the same ε, which runs the spec's non-private iteration) and with the average of the agents' models."""
    off = {(r.get("dataset"), r.get("algorithm"), float(r.get("epsilon"))): r for r in runs
           if r.get("algorithm") in BASELINES and r.params.get("noise") is False and r.available
           and r.get("epsilon") is not None}
    rows, sentences = [], []
    for dataset, algorithms in sorted(grid.items()):
        for algorithm in BASELINES:
            by_eps = algorithms.get(algorithm, {})
            if not by_eps:
                continue
            eps = max(by_eps)
            run = by_eps[eps]
            mean, _ = _error(run)
            majority = _majority([run])
            margin = _seed_margin(run)
            average = _average_error(run)
            twin = off.get((dataset, algorithm, eps))
            twin_error = _error(twin)[0] if twin is not None else None
            rows.append([dataset, PRIVATE[algorithm], f"{eps:g}", _fmt(*_error(run)), _cell(average),
                         "—" if twin_error is None else f"{twin_error:.4f}",
                         "—" if majority is None else f"{majority:.4f}"])
            if majority is None:
                sentences.append(f"{PRIVATE[algorithm]} on {dataset} at ε = {eps:g}: the run records no "
                                 "majority_error, not checked.")
                continue
            if mean < majority - margin:
                continue
            if twin_error is None:
                cause = "no noise-off run to tell the method from the reconstruction"
            elif twin_error < majority - _seed_margin(twin):  # the noise-off run's own seed variation
                cause = (f"the noise (the method): with the noise off the same iteration reaches {twin_error:.4f}, "
                         "so the non-private part of our reconstruction works; each agent's last release "
                         "carries its step's objective-perturbation noise, calibrated as the spec states "
                         "(the spec marks that calibration a reconstruction, so 'the method' means the "
                         "spec's mechanism)"
                         + ("" if average is None else f", which averaging the agents' models partly cancels "
                            f"({average[0]:.4f})"))
            else:
                cause = (f"not the noise: with the noise off the iteration still gets {twin_error:.4f}, so our "
                         "reconstruction of the non-private iteration is suspect")
            sentences.append(f"{PRIVATE[algorithm]} on {dataset} at ε = {eps:g} is not below the majority class "
                             f"({mean:.4f} vs {majority:.4f}, margin {margin:.4f}): {cause}.")
    text = ("# Baselines at the largest ε: method or reconstruction?\n\n"
            "Test error of the agents' local models and of the average of the agents' models (mean ± std "
            "over seeds), of the same run with the noise off (the spec's non-private iteration), and of the "
            "majority class. The specs' formulas (constants, noise sampler, inverse-map DP check) are pinned "
            "by tests/algorithms/test_dp_baselines.py.\n\n")
    if rows:
        text += markdown_table(["dataset", "algorithm", "ε", "local models", "average model", "noise off",
                                "majority class"], rows)
        text += "\n\n" + (" ".join(sentences) if sentences else
                           "Every baseline is below the majority class at the largest ε by more than its "
                           "margin (max(2 × seed standard error, 0.005)).")
    else:
        text += "No runs available."
    out.table("pp_admm_baselines_check", text)


def _sends(run: Run) -> str:
    sends = run.metrics.get("broadcasts_mean")
    return "—" if sends is None else f"{float(sends):.2f}"


def _study_outputs(studies: dict[str, list[Run]], out: ReportOutput, majority: float | None = None) -> None:
    import matplotlib.pyplot as plt

    parts = ["# PP-ADMM and IPP-ADMM parameter studies (Fig. 1-4)", "",
             "Test error (mean ± std over seeds) of the agents' own models (solid, the claims' measure) and "
             "of their average model (dashed) against one parameter, the others at the paper's values "
             "(`variant: paper`: η, β, α and the SVT's 2·C_loss on each agent's summed loss)."]
    rows_csv: list[dict[str, Any]] = []
    fig, axes = plt.subplots(1, len(STUDIES), figsize=(4.5 * len(STUDIES), 3.6), squeeze=False)
    for ax, (key, (algorithm, figure)) in zip(axes[0], STUDIES.items()):
        by_eps: dict[float, list[Run]] = defaultdict(list)
        for run in studies.get(key, []):
            by_eps[float(run.get("epsilon"))].append(run)
        table_rows = []
        for epsilon, runs in sorted(by_eps.items()):
            runs.sort(key=lambda r: float(r.get(key)))
            xs = [float(r.get(key)) for r in runs]
            for model, style in (("agents", "-"), ("average", "--")):
                values = [_model_error(r, model) for r in runs]
                points = [(x, *v) for x, v in zip(xs, values) if v is not None]
                if points:
                    px, means, stds = zip(*points)
                    ax.errorbar(px, means, yerr=stds, marker="o", capsize=3, linestyle=style,
                                label=f"ε = {epsilon:g}, {MODELS[model]}")
                rows_csv += [{"parameter": key, "algorithm": algorithm, "model": model, "value": x,
                              "epsilon": epsilon, "test_error": m, "test_error_std": s} for x, m, s in points]
            table_rows += [[f"{x:g}", f"{epsilon:g}", *_error_columns(r)[:2]]
                           + ([_sends(r)] if algorithm == "ipp_admm" else []) for x, r in zip(xs, runs)]
        if majority is not None and table_rows:
            table_rows.append(["majority class", "—", f"{majority:.4f}", f"{majority:.4f}"]
                              + (["—"] if algorithm == "ipp_admm" else []))
        header = [key, "ε", *ERROR_HEADER[:2]] + (["sends per agent"] if algorithm == "ipp_admm" else [])
        table = markdown_table(header, table_rows) if table_rows else "No runs available."
        parts += ["", f"## {figure}: {PRIVATE[algorithm]}, {key}", "", table]
        finite = [float(r.get(key)) for rs in by_eps.values() for r in rs]
        finite = [x for x in finite if math.isfinite(x) and x > 0]
        if finite and max(finite) / min(finite) > 50:
            ax.set_xscale("log")
        if majority is not None:
            ax.axhline(majority, color="grey", linestyle=":", label="majority class")
        ax.set(xlabel=key, ylabel="test error rate", title=f"{figure}: {PRIVATE[algorithm]}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    out.table("pp_admm_studies", "\n".join(parts))
    out.plot_data("pp_admm_studies", rows_csv, series=("epsilon", "model"))
    out.figure("pp_admm_studies", fig)


# ---------------------------------------------------------------------------------------------------------
# claims

#: The floor of every margin: half a point of error rate (below it a difference is not worth a claim).
MARGIN_FLOOR = 0.005
#: How close to the best achievable error "close" means in claim 7 (one point of error rate; our reading).
CLOSE_TOLERANCE = 0.01
MARGIN_TEXT = "max(2 × seed standard error of the difference, 0.005)"

Part = tuple[str, str]
"""One comparison of a claim: its verdict and the note that shows it."""


def _claim(dataset: str, suffix: str, statement: str, published: str, ours: str,
           passed: bool | None | str, margin: str = "") -> Claim:
    verdict = passed if isinstance(passed, str) else verdict_of(passed)
    return Claim(id=f"{PAPER}-{dataset}-{suffix}", paper=PAPER, statement=f"{dataset}: {statement}",
                 published=published, ours=ours, verdict=verdict, margin=margin)


def _claim_of_parts(dataset: str, suffix: str, statement: str, published: str, parts: Iterable[Part], *,
                    missing: str, margin: str = MARGIN_TEXT, prefix: str = "") -> Claim:
    """A claim made of several comparisons: FAIL if any part fails, NOT SHOWN if any is inside its margin
    (:func:`_combine`); its text is `prefix` and the parts' notes, or `missing` when there is no part."""
    parts = list(parts)
    notes = "; ".join(note for _, note in parts)
    return _claim(dataset, suffix, statement, published, (prefix + notes) if parts else missing,
                  _combine([verdict for verdict, _ in parts]), margin)


def _part(diff: float, margin: float, note: str) -> Part:
    """A comparison that holds when `diff` exceeds `margin`; its note ends with the verdict."""
    verdict = compare(diff, margin)
    return verdict, f"{note} ({verdict})"


def _seed_margin(run: Run) -> float:
    """Twice the standard error over seeds of a run's test error (0.005 floor: a half-point of error)."""
    _, std = _error(run)
    seeds = max(len((run.history or {}).get("runs") or []), 1)
    return max(2.0 * std / math.sqrt(seeds), 0.005)


def _majority_claims(dataset: str, algorithms: dict[str, dict[float, Run]]) -> list[Claim]:
    """Per algorithm and epsilon: its error is below the majority class's by more than the margin."""
    claims = []
    for algorithm, label in PRIVATE.items():
        for epsilon, run in sorted(algorithms.get(algorithm, {}).items()):
            majority = _majority([run])
            suffix = f"{algorithm.replace('_', '-')}-beats-majority-eps{epsilon:g}".replace(".", "_")
            statement = f"{label} at ε = {epsilon:g} beats the majority-class classifier"
            if majority is None:
                claims.append(_claim(dataset, suffix, statement, "Fig. 7 ('close to the best achievable')",
                                     "not checked: the run records no majority_error", None))
                continue
            error = _error(run)[0]
            margin = _seed_margin(run)
            claims.append(_claim(dataset, suffix, statement, "Fig. 7 ('close to the best achievable')",
                                 f"{error:.4f} vs majority class {majority:.4f}", compare(majority - error, margin),
                                 margin=f"{margin:.4f} = max(2 × seed standard error, 0.005)"))
    return claims


def _missing(algorithms: dict[str, dict[float, Run]], needed: tuple[str, ...]) -> str | None:
    absent = [PRIVATE[a] for a in needed if not algorithms.get(a)]
    return f"not checked: no runs of {', '.join(absent)}" if absent else None


def _metric(run: Run, key: str) -> tuple[float, float, int]:
    """(mean, std, seeds) of a final metric over the run's seeds."""
    m = run.metrics
    mean = m.get(f"{key}_mean", m.get(key))
    return (float("nan") if mean is None else float(mean), float(m.get(f"{key}_std", 0.0) or 0.0),
            int(m.get("seeds", 1) or 1))


def _se(run: Run, key: str = "test_error") -> float:
    _, std, seeds = _metric(run, key)
    return std / math.sqrt(max(seeds, 1))


def _pair_margin(a: Run, b: Run, key: str = "test_error", floor: float = MARGIN_FLOOR) -> float:
    """Twice the standard error of the difference of two runs' seed means, floored."""
    return max(2.0 * math.hypot(_se(a, key), _se(b, key)), floor)


def _final_loss(run: Run) -> tuple[float, float]:
    """(mean, standard error) over seeds of the last round's average training loss."""
    seeds = len((run.history or {}).get("runs") or [])
    finals = [recs[-1]["train_loss"] for recs in (run.records(s) for s in range(seeds))
              if recs and recs[-1].get("train_loss") is not None]
    if not finals:
        return float("nan"), 0.0
    return float(np.mean(finals)), float(np.std(finals, ddof=1) / math.sqrt(len(finals))) if len(finals) > 1 else 0.0


def _combine(verdicts: list[str]) -> str:
    """FAIL if any part fails, else NOT SHOWN if any part is inside its margin, else PASS (none: NOT CHECKED)."""
    if not verdicts or all(v == NOT_CHECKED for v in verdicts):
        return NOT_CHECKED
    for v in (FAIL, NOT_SHOWN, NOT_CHECKED):
        if v in verdicts:
            return v
    return PASS


def _study_by_eps(studies: dict[str, list[Run]], key: str) -> dict[float, dict[float, Run]]:
    """{epsilon: {parameter value: run}} of one study."""
    out: dict[float, dict[float, Run]] = defaultdict(dict)
    for run in studies.get(key, []):
        out[float(run.get("epsilon"))][float(run.get(key))] = run
    return out


def _all_worse(runs: Iterable[Run], ref: Run) -> str:
    """The verdict that each of `runs` has a higher error than `ref`, each with its pair margin."""
    return _combine([compare(_error(r)[0] - _error(ref)[0], _pair_margin(r, ref)) for r in runs])


def _splits_parts(studies) -> Iterable[Part]:
    for eps, by in sorted(_study_by_eps(studies, "splits").items()):
        if len(by) < 2:
            continue
        lo, hi = by[min(by)], by[max(by)]
        margin = _pair_margin(lo, hi)
        yield _part(_error(hi)[0] - _error(lo)[0], margin,
                    f"ε = {eps:g}: splits {min(by):g} → {_error(lo)[0]:.4f}, {max(by):g} → "
                    f"{_error(hi)[0]:.4f}, margin {margin:.4f}")


def _beta_parts(studies) -> Iterable[Part]:
    for eps, by in sorted(_study_by_eps(studies, "beta").items()):
        betas = sorted(by)
        if len(betas) < 3:
            continue
        best = min(betas[1:-1], key=lambda b: _error(by[b])[0])
        verdict = _all_worse((by[betas[0]], by[betas[-1]]), by[best])
        yield verdict, (f"ε = {eps:g}: best interior β = {best:.3g} ({_error(by[best])[0]:.4f}) vs β = "
                        f"{betas[0]:.3g} ({_error(by[betas[0]])[0]:.4f}) and β = {betas[-1]:.3g} "
                        f"({_error(by[betas[-1]])[0]:.4f}) ({verdict})")


def _c_loss_parts(studies) -> Iterable[Part]:
    for eps, by in sorted(_study_by_eps(studies, "C_loss").items()):
        if 2.0 not in by or min(by) >= 2.0 or max(by) <= 2.0:
            continue
        verdict = _all_worse((by[min(by)], by[max(by)]), by[2.0])
        errors = {c: f"{_error(by[c])[0]:.4f}" for c in (2.0, min(by), max(by))}
        yield verdict, (f"ε = {eps:g}: C_loss 2 → {errors[2.0]}, {min(by):g} → {errors[min(by)]}, "
                        f"{max(by):g} → {errors[max(by)]} ({verdict})")


def _alpha_best_parts(studies) -> Iterable[Part]:
    for eps, by in sorted(_study_by_eps(studies, "alpha").items()):
        if 1e-3 not in by or len(by) < 2:
            continue
        ref = by[1e-3]
        rival = min((a for a in by if a != 1e-3), key=lambda a: _error(by[a])[0])
        yield _part(_error(by[rival])[0] - _error(ref)[0], _pair_margin(by[rival], ref),
                    f"ε = {eps:g}: α = 1e-3 → {_error(ref)[0]:.4f}, best other α = {rival:g} → "
                    f"{_error(by[rival])[0]:.4f}")


def _alpha_sends_parts(studies) -> Iterable[Part]:
    for eps, by in sorted(_study_by_eps(studies, "alpha").items()):
        if 1e-3 not in by or len(by) < 2:
            continue
        ref, large = by[1e-3], by[max(by)]
        sends_ref, sends_large = _metric(ref, "broadcasts_mean")[0], _metric(large, "broadcasts_mean")[0]
        send_margin = max(2.0 * math.hypot(_se(ref, "broadcasts_mean"), _se(large, "broadcasts_mean")), 0.5)
        verdict = _combine([compare(_error(large)[0] - _error(ref)[0], _pair_margin(large, ref)),
                            compare(sends_ref - sends_large, send_margin)])
        yield verdict, (f"ε = {eps:g}: α = {max(by):g} → error {_error(large)[0]:.4f}, {sends_large:.2f} "
                        f"sends per agent; α = 1e-3 → {_error(ref)[0]:.4f}, {sends_ref:.2f} sends "
                        f"({verdict})")


def _study_claims(dataset: str, studies: dict[str, list[Run]]) -> list[Claim]:
    """Claims 1-4 of the spec (Fig. 1-4), each comparison with its seed margin."""
    return [
        _claim_of_parts(dataset, "claim1-smaller-splits-lower-error",
                        "Fig. 1: PP-ADMM's test error is lower at the smallest split than at the largest "
                        "(β = 1e-6)",
                        "Fig. 1", _splits_parts(studies), missing="not checked: no splits study"),
        _claim_of_parts(dataset, "claim2-beta-u-shape",
                        "Fig. 2: PP-ADMM's test error is U-shaped in β: the best interior β beats both the "
                        "smallest and the largest β", "Fig. 2 (best near 10^-3.5)", _beta_parts(studies),
                        missing="not checked: no β study with three values"),
        _claim_of_parts(dataset, "claim3-c-loss-2-best",
                        "Fig. 3: IPP-ADMM with C_loss = 2 has lower test error than the smallest and the "
                        "largest C_loss", "Fig. 3", _c_loss_parts(studies),
                        missing="not checked: no C_loss study around 2"),
        _claim_of_parts(dataset, "claim4-alpha-1e-3-best",
                        "Fig. 4: IPP-ADMM with α = 1e-3 has lower test error than every other α", "Fig. 4",
                        _alpha_best_parts(studies), missing="not checked: no α study with α = 1e-3"),
        _claim_of_parts(dataset, "claim4-large-alpha-fewer-sends",
                        "Fig. 4: IPP-ADMM with the largest α has higher test error and sends fewer models "
                        "than with α = 1e-3", "Fig. 4", _alpha_sends_parts(studies),
                        missing="not checked: no α study with α = 1e-3",
                        margin=MARGIN_TEXT + "; sends: max(2 × seed SE, 0.5 sends per agent)"),
    ]


def _beats_baselines_parts(algorithms, ours: str) -> Iterable[Part]:
    common = sorted(set(algorithms[ours]).intersection(*(algorithms[b] for b in BASELINES)))
    for e in common:
        run = algorithms[ours][e]
        mine = _error(run)[0]
        best_alg = min(BASELINES, key=lambda b: _error(algorithms[b][e])[0])
        best = _error(algorithms[best_alg][e])[0]
        majority = _majority([run])
        rival = best if majority is None else min(best, majority)
        yield _part(rival - mine, _pair_margin(run, algorithms[best_alg][e]),
                    f"ε = {e:g}: {mine:.4f} vs best baseline {best:.4f}, majority "
                    f"{'—' if majority is None else f'{majority:.4f}'}")


def _ipp_below_pp_parts(algorithms) -> Iterable[Part]:
    for e in sorted(set(algorithms["pp_admm"]) & set(algorithms["ipp_admm"])):
        pp, ipp = algorithms["pp_admm"][e], algorithms["ipp_admm"][e]
        yield _part(_error(pp)[0] - _error(ipp)[0], _pair_margin(pp, ipp),
                    f"ε = {e:g}: IPP {_error(ipp)[0]:.4f} vs PP {_error(pp)[0]:.4f}")


def _claims(dataset: str, algorithms: dict[str, dict[float, Run]], baseline: Run | None,
            studies: dict[str, list[Run]] | None = None, centralized: Run | None = None) -> list[Claim]:
    claims = _majority_claims(dataset, algorithms)
    claims.extend(_study_claims(dataset, studies or {}))
    # 5. PP/IPP below every baseline (and the majority class) at every epsilon: less budget for the same error
    for ours in ("pp_admm", "ipp_admm"):
        suffix = f"claim5-{ours.replace('_', '-')}-beats-baselines"
        statement = (f"Fig. 5: {PRIVATE[ours]}'s test error is below DVP's, M-ADMM's and R-ADMM's and below "
                     "the majority class's at every ε (so it needs less budget for the same error)")
        reason = _missing(algorithms, (ours, *BASELINES))
        claims.append(_claim(dataset, suffix, statement, "Fig. 5", reason, None) if reason else
                      _claim_of_parts(dataset, suffix, statement, "Fig. 5",
                                      _beats_baselines_parts(algorithms, ours), missing="no common ε",
                                      margin="per ε: " + MARGIN_TEXT))
    statement = "Fig. 5: IPP-ADMM's test error is below PP-ADMM's at every ε (less budget for the same error)"
    reason = _missing(algorithms, ("pp_admm", "ipp_admm"))
    claims.append(_claim(dataset, "claim5-ipp-below-pp", statement, "Fig. 5", reason, None) if reason else
                  _claim_of_parts(dataset, "claim5-ipp-below-pp", statement, "Fig. 5",
                                  _ipp_below_pp_parts(algorithms), missing="no common ε",
                                  margin="per ε: " + MARGIN_TEXT))
    claims.extend(_loss_claims(dataset, algorithms))
    claims.extend(_epsilon_claims(dataset, algorithms, baseline, centralized))
    return claims


def _baseline_loss_parts(algorithms) -> Iterable[Part]:
    low, high = min(LOSS_CURVE_EPSILONS), max(LOSS_CURVE_EPSILONS)
    for b in BASELINES:
        runs = algorithms.get(b, {})
        if low not in runs or high not in runs:
            continue
        (l_lo, se_lo), (l_hi, se_hi) = _final_loss(runs[low]), _final_loss(runs[high])
        yield _part(l_lo - l_hi, max(2.0 * math.hypot(se_lo, se_hi), MARGIN_FLOOR),
                    f"{PRIVATE[b]}: {l_hi:.4g} at ε = {high:g}, {l_lo:.4g} at ε = {low:g}")


def _lower_loss_parts(algorithms) -> Iterable[Part]:
    for e in LOSS_CURVE_EPSILONS:
        finals = {a: _final_loss(algorithms[a][e]) for a in PRIVATE if e in algorithms.get(a, {})}
        if not all(a in finals for a in ("pp_admm", "ipp_admm")) or not any(b in finals for b in BASELINES):
            continue
        best_b = min((b for b in BASELINES if b in finals), key=lambda b: finals[b][0])
        for ours in ("pp_admm", "ipp_admm"):
            yield _part(finals[best_b][0] - finals[ours][0],
                        max(2.0 * math.hypot(finals[ours][1], finals[best_b][1]), MARGIN_FLOOR),
                        f"ε = {e:g}: {PRIVATE[ours]} {finals[ours][0]:.4g} vs {PRIVATE[best_b]} "
                        f"{finals[best_b][0]:.4g}")


def _loss_claims(dataset: str, algorithms: dict[str, dict[float, Run]]) -> list[Claim]:
    """Claim 6 (Fig. 6): the baselines' final training loss rises as ε falls; PP/IPP end lower."""
    low, high = min(LOSS_CURVE_EPSILONS), max(LOSS_CURVE_EPSILONS)
    margin = "max(2 × seed SE of the difference, 0.005) in loss"
    return [
        _claim_of_parts(dataset, "claim6-baseline-loss-rises",
                        f"Fig. 6: each baseline's final average training loss is higher at ε = {low:g} than "
                        f"at ε = {high:g}", "Fig. 6", _baseline_loss_parts(algorithms),
                        missing="not checked: baseline runs missing", margin=margin),
        _claim_of_parts(dataset, "claim6-pp-ipp-lower-loss",
                        "Fig. 6: PP-ADMM and IPP-ADMM end at a lower average training loss than the best "
                        f"baseline at ε ∈ {{{', '.join(f'{e:g}' for e in LOSS_CURVE_EPSILONS)}}}", "Fig. 6",
                        _lower_loss_parts(algorithms), missing="not checked: runs missing", margin=margin),
    ]


def _falls_parts(algorithms) -> Iterable[Part]:
    for algorithm, label in PRIVATE.items():
        by_eps = algorithms.get(algorithm, {})
        if len(by_eps) < 2:
            continue
        lo, hi = by_eps[min(by_eps)], by_eps[max(by_eps)]
        yield _part(_error(lo)[0] - _error(hi)[0], _pair_margin(lo, hi),
                    f"{label} " + " → ".join(f"{_error(by_eps[e])[0]:.4f}" for e in sorted(by_eps)))


def _close_parts(by_eps: dict[float, Run], best: Run) -> Iterable[Part]:
    for e, run in sorted(by_eps.items()):
        gap = _error(run)[0] - _error(best)[0]
        yield _part(CLOSE_TOLERANCE - gap, _pair_margin(run, best),
                    f"ε = {e:g}: {_error(run)[0]:.4f}, gap {gap:+.4f}")


def _epsilon_claims(dataset: str, algorithms: dict[str, dict[float, Run]], baseline: Run | None,
                    centralized: Run | None) -> list[Claim]:
    """Claim 7 (Fig. 7): error falls with ε; PP/IPP close to the best achievable error."""
    claims = [_claim_of_parts(dataset, "claim7-error-falls-with-epsilon",
                              "Fig. 7: every private algorithm's test error is lower at the largest ε than "
                              "at the smallest", "Fig. 5/7", _falls_parts(algorithms),
                              missing="not checked: runs missing")]
    references = [r for r in (baseline, centralized) if r is not None and r.available]
    for ours in ("pp_admm", "ipp_admm"):
        suffix = f"claim7-{ours.replace('_', '-')}-near-best-achievable"
        statement = (f"Fig. 7: {PRIVATE[ours]}'s test error is within {CLOSE_TOLERANCE:g} of the best achievable "
                     "(the better of the non-private decentralized ADMM and centralized LR) at every ε ≥ 1")
        published = "Fig. 7 ('close to the best achievable')"
        by_eps = {e: r for e, r in algorithms.get(ours, {}).items() if e >= 1.0}
        if not references or not by_eps:
            claims.append(_claim(dataset, suffix, statement, published,
                                 "not checked: reference or private runs missing", None))
            continue
        best = min(references, key=lambda r: _error(r)[0])
        claims.append(_claim_of_parts(dataset, suffix, statement, published, _close_parts(by_eps, best),
                                      missing="not checked: runs missing",
                                      margin=f"closeness {CLOSE_TOLERANCE:g} (our reading of 'close'); "
                                             + MARGIN_TEXT,
                                      prefix=f"best achievable {_error(best)[0]:.4f} ({best.name}); "))
    return claims
