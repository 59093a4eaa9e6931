"""FDML report: the Table I analogue, the staleness study and the paper's claims restated for public data.

Reads two groups of runs, each identified by its experiment-name prefix and described by its own fields:

- ``fdml_table1-*``: one run per dataset x ``local_model`` (lr, nn) x ``features`` (local, all, split),
  the rows local / centralized / FDML of Table I. The published numbers (``published/fdml_table1.csv``
  under the report root) are on Tencent's private data, so they sit beside ours for the pattern (FDML vs
  centralized vs local), not for the absolute values.
- ``fdml_staleness-*``: the same model under staleness bounds ``tau`` with uneven parties; simulated runs give
  the reproducible wall-clock model, ``mode: threads`` runs the real-clock observation.

Outputs: ``tables/fdml_table1.md``, ``tables/fdml_staleness.md``, plot data and figures ``fdml_curves`` (train
objective per epoch of the Table I runs) and ``fdml_staleness`` (train objective against simulated time).

References
----------
Y. Hu, D. Niu, J. Yang, S. Zhou, "FDML: A Collaborative Machine Learning Framework for Distributed
Features", KDD 2019; preprint "Stochastic Distributed Optimization for Machine Learning from Decentralized
Features", Table I.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import Any

from ppml.report.base import Claim, ReportOutput, Run, Runs, compare, markdown_table, verdict_of

PAPER = "fdml"
TABLE_PREFIX = "fdml_table1-"
STALENESS_PREFIX = "fdml_staleness-"
PUBLISHED = ("published", "fdml_table1.csv")  # under the report root
DATASETS = ("a9a", "default_credit")
MODELS = {"lr": "LR", "nn": "NN"}  # local_model field -> Table I's model column
SETTINGS = {"local": "local", "all": "centralized", "split": "FDML"}  # features field -> Table I's setting
TABLE_EPOCH = 10  # Table I reports epoch 10
NEAR_AUC = 0.01  # "very close": the paper's FDML-LR vs centralized-LR AUC gap is 0.0066; we allow 0.01
FALLBACK_AUC_MARGIN = 0.005  # AUC margin when a comparison has no seed replicates to measure one from
TIME_MARGIN = 0.10  # timing claims: the cost model is deterministic; require a 10 % difference
TARGET_GAP = 0.01  # staleness study target: within 1 % (relative) of the best final train objective
METRICS = ("train_objective", "test_logloss", "test_auc", "seconds")


def _published(out: ReportOutput) -> dict[tuple[str, str], dict[str, Any]]:
    """Table I as printed, keyed by (model, setting); empty when the file is absent."""
    path = out.root.joinpath(*PUBLISHED)
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {(r["model"], r["setting"]): {k: float(r[k]) for k in METRICS} | {"citation": r["citation"]}
            for r in rows if r["paper"] == PAPER}


def _table_runs(runs: Runs) -> dict[tuple[str, str, str], Run]:
    """Table I runs keyed by (dataset, model, setting)."""
    out: dict[tuple[str, str, str], Run] = {}
    for run in runs:
        if not run.name.startswith(TABLE_PREFIX):
            continue
        key = (run.get("dataset"), MODELS.get(run.get("local_model")), SETTINGS.get(run.get("features")))
        if key in out:
            raise LookupError(f"two Table I runs for {key}: {out[key].name} and {run.name}")
        out[key] = run
    return out


def _records(run: Run | None) -> list[dict[str, Any]]:
    """Per-epoch records of an available run (the first seed's when the run has several)."""
    return [] if run is None else run.records()


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


@dataclass(frozen=True)
class _At:
    """One metric of a run at epoch `TABLE_EPOCH`: mean and standard error over the run's seeds."""

    mean: float
    se: float | None  # None with a single seed
    seeds: int


def _at_epoch(run: Run | None, key: str, epoch: int = TABLE_EPOCH) -> _At | None:
    """`key` at `epoch` over every seed of the run (None when the run or the epoch is missing)."""
    if run is None or not run.available:
        return None
    values = []
    for s in range(len((run.history or {}).get("runs") or [])):
        recs = [r for r in run.records(s) if r.get("epoch") == epoch]
        if recs and _num(recs[0].get(key)) is not None:
            values.append(float(recs[0][key]))
    if not values:
        return None
    k = len(values)
    mean = sum(values) / k
    se = None if k < 2 else math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1) / k)
    return _At(mean, se, k)


def _auc_margin(a: _At, b: _At) -> tuple[float, str]:
    """Twice the standard error of a difference of two seed means, or the fallback without replicates."""
    if a.se is None or b.se is None:
        return FALLBACK_AUC_MARGIN, (f"{FALLBACK_AUC_MARGIN} AUC (fixed: a run has a single seed, so no seed "
                                     "variation could be measured)")
    margin = 2 * math.sqrt(a.se ** 2 + b.se ** 2)
    return margin, (f"{margin:.4f} AUC = 2 x the standard error of the difference of the seed means "
                    f"({a.seeds} and {b.seeds} seeds)")


def _fmt(x: _At) -> str:
    return f"{x.mean:.4f}" + ("" if x.se is None else f" ± {x.se:.4f}")


def _table1(runs: dict[tuple[str, str, str], Run], published: dict, out: ReportOutput) -> None:
    header = ["model", "setting", "data", "protocol", "seeds", f"train objective (epoch {TABLE_EPOCH})",
              "test log loss", "test AUC", "AUC - centralized", "cost-model s / epoch", "simulated time",
              "wall s (one process)"]
    rows: list[list[Any]] = []
    for model in MODELS.values():
        for setting in SETTINGS.values():
            paper = published.get((model, setting))
            if paper:
                central = published.get((model, "centralized"), {}).get("test_auc")
                gap = None if central is None else paper["test_auc"] - central
                rows.append([model, setting, "paper (Tencent, private)", "—", None,
                             paper["train_objective"], paper["test_logloss"], paper["test_auc"], gap, None,
                             None, paper["seconds"]])
            for dataset in DATASETS:
                run = runs.get((dataset, model, setting))
                auc = _at_epoch(run, "test_auc")
                if auc is None:
                    rows.append([model, setting, dataset, "not run"] + [None] * 8)
                    continue
                central = _at_epoch(runs.get((dataset, model, "centralized")), "test_auc")
                obj, loss = _at_epoch(run, "train_objective"), _at_epoch(run, "test_logloss")
                cost = _at_epoch(run, "cost_seconds")
                sim, wall = _at_epoch(run, "sim_time"), _at_epoch(run, "seconds")
                rows.append([model, setting, dataset, run.get("protocol"), auc.seeds,
                             _fmt(obj) if obj else None, _fmt(loss) if loss else None, _fmt(auc),
                             None if central is None else auc.mean - central.mean,
                             None if cost is None else cost.mean / TABLE_EPOCH,
                             None if sim is None else sim.mean, None if wall is None else wall.mean])
    note = (f"Table I analogue at epoch {TABLE_EPOCH} (as the paper's Table I; mean ± standard error over "
            "seeds). The paper's numbers are on Tencent's private app data; ours on public data, so compare "
            "the pattern (FDML vs centralized vs local), not the values. FDML runs Algorithm 1 as written "
            "(protocol `paper`: labels at every worker, prediction matrix A of post-update pushes, clock-gap "
            "rule); local and centralized are standard mini-batch SGD (protocol `sgd`). `cost-model s / "
            "epoch`: the slowest worker's compute (flops at the run's `flop_rate`) plus its messages "
            "(`latency` each, bytes at `bandwidth`), per epoch; `simulated time`: the event simulator's "
            "clock (iterations of a speed-1 party); `wall s`: this process, all roles in one.")
    out.table("fdml_table1", note + "\n\n" + markdown_table(header, rows))


def _curves(runs: dict[tuple[str, str, str], Run], out: ReportOutput) -> None:
    import matplotlib.pyplot as plt

    panels = (("train_objective", "training objective"), ("test_logloss", "test log loss"),
              ("test_auc", "test AUC"))
    rows = []
    fig, axes = plt.subplots(len(DATASETS) * len(MODELS), len(panels), figsize=(12, 11), squeeze=False)
    for r, (dataset, model) in enumerate((d, m) for d in DATASETS for m in MODELS.values()):
        for setting in SETTINGS.values():
            records = _records(runs.get((dataset, model, setting)))
            if not records:
                continue
            for c, (key, label) in enumerate(panels):
                ax = axes[r][c]
                ax.plot([x["epoch"] for x in records], [x.get(key) for x in records], label=setting)
                ax.set_title(f"{dataset}, {model}: {label}")
                ax.set_xlabel("epoch")
            rows += [{"dataset": dataset, "model": model, "setting": setting, "epoch": x["epoch"],
                      "train_objective": x["train_objective"], "test_logloss": x.get("test_logloss"),
                      "test_auc": x.get("test_auc")} for x in records]
        for c in range(len(panels)):
            ax = axes[r][c]
            if ax.has_data():
                ax.axvline(TABLE_EPOCH, color="grey", linestyle=":")
                ax.legend(fontsize=7)
    fig.tight_layout()
    out.plot_data("fdml_curves", rows)
    out.figure("fdml_curves", fig)


def _time_to_target(records: list[dict[str, Any]], target: float,
                    clock: str) -> tuple[int | None, float | None]:
    """The first epoch whose training objective is at most `target`, and the `clock` reading then."""
    for rec in records:
        if rec["train_objective"] <= target:
            return rec["epoch"], rec.get(clock)
    return None, None


def _observed(run: Run) -> str:
    """Real asynchrony (threads mode): the staleness the pushes had, server clock minus the worker's."""
    first = (run.history.get("runs") or [{}])[0]
    seen = first.get("extra", {}).get("observed_staleness")
    return "—" if not seen else f"{seen['mean']:.2f} / {seen['max']}"


def _staleness(runs: Runs, out: ReportOutput) -> list[Run]:
    """The staleness table and figure; returns the simulated runs ordered by tau."""
    import matplotlib.pyplot as plt

    study = sorted((r for r in runs if r.name.startswith(STALENESS_PREFIX) and r.available),
                   key=lambda r: (r.get("mode"), r.get("tau")))
    finals = [_num(r.get("train_objective")) for r in study]
    finals = [f for f in finals if f is not None]
    if not study or not finals:
        out.table("fdml_staleness", "Staleness study: not run (no `fdml_staleness-*` runs available).")
        return []
    target = min(finals) * (1 + TARGET_GAP)
    header = ["mode", "protocol", "tau", "speeds", "epochs", "final train objective", "epochs to target",
              "simulated time to target", "simulated time / epoch", "seconds to target", "seconds / epoch",
              "max clock gap", "rejected pulls", "max age used", "mean age used", "transport",
              "observed staleness (mean / max)"]
    rows, plot_rows = [], []
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in study:
        records = _records(run)
        epoch_hit, sim_hit = _time_to_target(records, target, "sim_time")
        _, sec_hit = _time_to_target(records, target, "seconds")
        rows.append([run.get("mode"), run.get("protocol"), run.get("tau"), run.get("speeds"),
                     run.get("epochs"), _num(run.get("train_objective")),
                     "not reached" if epoch_hit is None else epoch_hit,
                     sim_hit, _num(run.get("sim_time_per_epoch")), sec_hit,
                     _num(run.get("seconds_per_epoch")), run.get("max_gap"), run.get("rejections"),
                     run.get("max_delay"), _num(run.get("mean_delay")), run.params.get("transport", "inprocess"),
                     _observed(run)])
        if run.get("mode") == "simulated" and records:
            ax.plot([x["sim_time"] for x in records], [x["train_objective"] for x in records],
                    label=f"tau = {run.get('tau')}")
            plot_rows += [{"tau": run.get("tau"), "epoch": x["epoch"], "sim_time": x["sim_time"],
                           "seconds": x["seconds"], "train_objective": x["train_objective"],
                           "mean_age": x.get("mean_delay")} for x in records]
    ax.axhline(target, color="grey", linestyle=":", label="target")
    ax.set_xlabel("simulated time (iterations of a speed-1 party)")
    ax.set_ylabel("training objective")
    ax.legend()
    fig.tight_layout()
    note = (f"Staleness study: target = best final training objective x (1 + {TARGET_GAP}) = {target:.5f}. "
            "Simulated runs model the parallel wall clock (per-party speeds, random iteration times); "
            "threads runs are one real run each under real asynchrony (every party its own process, "
            "transport: ray, completions taken as they arrive; `observed staleness`: per push, the most "
            "iterations any worker had completed minus the pushing worker's), reported, not reproducible. "
            "Under "
            "Algorithm 1 (protocol `paper`) tau bounds the clock gap (`max clock gap`; a pull further ahead "
            "is rejected and retried), not the age of the predictions used: `max/mean age used` is "
            "t - (iteration whose post-update push filled the A entry), about an epoch after the "
            "synchronous first epoch, whatever tau (negative when a faster party already pushed a later "
            "epoch's prediction for the row).")
    out.table("fdml_staleness", note + "\n\n" + markdown_table(header, rows))
    out.plot_data("fdml_staleness", plot_rows)
    out.figure("fdml_staleness", fig)
    return [r for r in study if r.get("mode") == "simulated"]


def _claim(claim_id: str, statement: str, published: str, ours: str, verdict: str, margin: str = "") -> Claim:
    return Claim(id=claim_id, paper=PAPER, statement=statement, published=published, ours=ours,
                 verdict=verdict, margin=margin)


def _missing(claim_id: str, statement: str, published: str, what: str) -> Claim:
    return _claim(claim_id, statement, published, f"not run: {what}", verdict_of(None))


def _paper_pair(published: dict, key: str, a: tuple[str, str], b: tuple[str, str]) -> str:
    pa, pb = published.get(a, {}).get(key), published.get(b, {}).get(key)
    if pa is None or pb is None:
        return "Table I: n/a"
    return f"Table I (Tencent): {a[0]} {a[1]} {pa:g} vs {b[0]} {b[1]} {pb:g}"


def _auc_claims(table: dict, published: dict, dataset: str) -> list[Claim]:
    claims = []

    def auc(model: str, setting: str) -> _At | None:
        return _at_epoch(table.get((dataset, model, setting)), "test_auc")

    for model in MODELS.values():
        cid = f"fdml-beats-local-{model.lower()}-{dataset}"
        statement = (f"FDML {model} has a higher test AUC than the local-features-only {model} at epoch "
                     f"{TABLE_EPOCH} ({dataset})")
        pub = _paper_pair(published, "test_auc", (model, "FDML"), (model, "local"))
        f, loc = auc(model, "FDML"), auc(model, "local")
        if f is None or loc is None:
            claims.append(_missing(cid, statement, pub, f"{dataset} {model} FDML or local run missing"))
        else:
            margin, why = _auc_margin(f, loc)
            claims.append(_claim(cid, statement, pub, f"FDML {_fmt(f)} vs local {_fmt(loc)} "
                                 f"(difference {f.mean - loc.mean:+.4f})", compare(f.mean - loc.mean, margin),
                                 why))

    cid = f"fdml-lr-near-centralized-{dataset}"
    statement = (f"FDML LR, run asynchronously (Algorithm 1: tau > 0, uneven parties, epoch-old entries of "
                 f"A), is within {NEAR_AUC} test AUC of centralized LR (fresh mini-batch SGD, all features) "
                 f"at epoch {TABLE_EPOCH} ({dataset}). Both fit the same linear model, so this tests whether "
                 "Algorithm 1's stale predictions and clock-gap asynchrony cost accuracy after 10 epochs, "
                 "not whether the model class matters; the difference checked is "
                 f"{NEAR_AUC} - |AUC_centralized - AUC_FDML|")
    pub = _paper_pair(published, "test_auc", ("LR", "FDML"), ("LR", "centralized")) + \
        " (gap 0.0066: 'very close')"
    f, c = auc("LR", "FDML"), auc("LR", "centralized")
    fdml_run = table.get((dataset, "LR", "FDML"))
    if f is None or c is None:
        claims.append(_missing(cid, statement, pub, f"{dataset} LR FDML or centralized run missing"))
    else:
        margin, why = _auc_margin(f, c)
        tau = fdml_run.get("tau") if fdml_run is not None else None
        ours = (f"FDML {_fmt(f)} (protocol {fdml_run.get('protocol')}, tau {tau}) vs centralized {_fmt(c)}: "
                f"gap {c.mean - f.mean:+.4f}")
        verdict = compare(NEAR_AUC - abs(c.mean - f.mean), margin)
        if not tau:
            verdict, ours = verdict_of(None), ours + "; not checked: the FDML run is synchronous (tau = 0)"
        claims.append(_claim(cid, statement, pub, ours, verdict, why))

    cid = f"fdml-centralized-nn-better-{dataset}"
    statement = (f"Centralized NN (one network over all features) has a higher test AUC than FDML NN (one "
                 f"network per party, outputs summed) at epoch {TABLE_EPOCH} ({dataset})")
    pub = _paper_pair(published, "test_auc", ("NN", "centralized"), ("NN", "FDML")) + " ('slightly better')"
    f, c = auc("NN", "FDML"), auc("NN", "centralized")
    if f is None or c is None:
        claims.append(_missing(cid, statement, pub, f"{dataset} NN FDML or centralized run missing"))
    else:
        margin, why = _auc_margin(c, f)
        claims.append(_claim(cid, statement, pub, f"centralized {_fmt(c)} vs FDML {_fmt(f)} "
                             f"(difference {c.mean - f.mean:+.4f})", compare(c.mean - f.mean, margin), why))
    return claims


COST_NOTE = ("on the cost model (not measured time): per iteration, the slowest worker's compute at the "
             "run's flop_rate plus, amortized, its messages at `latency` each and bytes at `bandwidth`; "
             "local and centralized have no messages")


def _time_claims(table: dict, published: dict, dataset: str) -> list[Claim]:
    claims = []

    def cost(model: str, setting: str) -> float | None:
        at = _at_epoch(table.get((dataset, model, setting)), "cost_seconds")
        return None if at is None else at.mean

    def slower(cid: str, statement: str, pub: str, slow: tuple[str, str], fast: tuple[str, str]) -> Claim:
        a, b = cost(*slow), cost(*fast)
        if a is None or b is None:
            return _missing(cid, statement, pub, f"{dataset} {slow} or {fast} run missing")
        margin = TIME_MARGIN * b
        return _claim(cid, statement, pub,
                      f"{slow[0]} {slow[1]} {a:.3g} s vs {fast[0]} {fast[1]} {b:.3g} s for {TABLE_EPOCH} "
                      "epochs",
                      compare(a - b, margin),
                      f"{margin:.3g} s = {TIME_MARGIN:.0%} of the faster time (the cost model is "
                      "deterministic)")

    cid = f"fdml-local-fastest-{dataset}"
    statement = (f"Local training is faster than centralized and FDML training of the same model (LR and "
                 f"NN), for {TABLE_EPOCH} epochs ({dataset}), " + COST_NOTE)
    pub = "Table I (Tencent): local LR 546 s, local NN 784 s; every other row of its model slower"
    times = {(m, s): cost(m, s) for m in MODELS.values() for s in SETTINGS.values()}
    if any(v is None for v in times.values()):
        claims.append(_missing(cid, statement, pub, f"{dataset} Table I runs missing"))
    else:
        # the smallest relative lead of local over the other settings of its model
        leads = {m: min(times[(m, s)] for s in SETTINGS.values() if s != "local") / times[(m, "local")] - 1
                 for m in MODELS.values()}
        ours = "; ".join(f"{m}: local {times[(m, 'local')]:.3g} s vs fastest other "
                         f"{times[(m, 'local')] * (1 + lead):.3g} s" for m, lead in leads.items())
        claims.append(_claim(cid, statement, pub, ours, compare(min(leads.values()), TIME_MARGIN),
                             f"{TIME_MARGIN:.0%} relative (the cost model is deterministic)"))
    claims.append(slower(f"fdml-lr-slower-than-centralized-{dataset}",
                         f"FDML LR is slower than centralized LR (communication dominates) ({dataset}), "
                         + COST_NOTE,
                         "Table I (Tencent): FDML LR 3530 s vs centralized LR 1063 s",
                         ("LR", "FDML"), ("LR", "centralized")))
    claims.append(slower(f"fdml-centralized-nn-slower-{dataset}",
                         f"Centralized NN is slower than FDML NN (bigger model on one machine; FDML spreads "
                         f"it over the parties) ({dataset}), " + COST_NOTE,
                         "Table I (Tencent): centralized NN 8051 s vs FDML NN 4369 s",
                         ("NN", "centralized"), ("NN", "FDML")))
    return claims


def _claims(table: dict[tuple[str, str, str], Run], published: dict, simulated: list[Run]) -> list[Claim]:
    claims = []
    for dataset in DATASETS:
        claims += _auc_claims(table, published, dataset)
        claims += _time_claims(table, published, dataset)

    cid = "fdml-staleness-lowers-wallclock"
    statement = ("With uneven parties, a larger staleness bound tau lowers the time per epoch on the "
                 "simulated parallel clock: non-increasing over the tau studied, and lower at the largest "
                 "tau than at tau = 0")
    pub = "the paper's motivation for bounded asynchrony (no tau sweep printed)"
    per_epoch = [(r.get("tau"), _num(r.get("sim_time_per_epoch"))) for r in simulated]
    per_epoch = [(t, v) for t, v in per_epoch if v is not None]
    if len(per_epoch) < 2 or per_epoch[0][0] != 0:
        claims.append(_missing(cid, statement, pub, "need simulated staleness runs including tau = 0"))
    else:
        values = [v for _, v in per_epoch]
        ours = ", ".join(f"tau={t}: {v:.2f}" for t, v in per_epoch) + " time units per epoch"
        margin = TIME_MARGIN * values[0]
        verdict = compare(values[0] - values[-1], margin)
        if not all(b <= a for a, b in zip(values, values[1:])):
            verdict, ours = verdict_of(False), ours + " (not monotone)"
        claims.append(_claim(cid, statement, pub, ours, verdict,
                             f"{margin:.3g} = {TIME_MARGIN:.0%} of the tau = 0 time (one seeded simulation)"))
    return claims


def build(runs: Runs, out: ReportOutput) -> list[Claim]:
    """Write the FDML tables and figures; return the FDML claims (NOT CHECKED where runs are missing)."""
    published = _published(out)
    table = _table_runs(runs)
    _table1(table, published, out)
    _curves(table, out)
    simulated = _staleness(runs, out)
    return _claims(table, published, simulated)
