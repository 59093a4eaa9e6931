"""Paillier quasi-Newton report: Table 1 of the FATE poster beside our encrypted runs, and their traffic.

Reads the runs of algorithms ``paillier_sgd`` and ``paillier_sqn`` on ``default_credit`` (Credit 1) and
``give_credit`` (Credit 2) with batch sizes 1000 and 3000, selected by their fields
(``Runs.one(algorithm=..., dataset=..., batch_size=..., encrypted=True)``), and the published Table 1 from
``published/paillier_sqn_table1.csv`` under the report root. Objective (1) of the poster has no regularizer;
the encrypted runs use lam = 0.01, so plaintext-mode runs (``encrypted: false``, bit-identical arithmetic)
with ``lam: 0`` give Table 1's lambda = 0 columns beside them. How eta and lam were chosen is written in
:data:`SELECTION_RULE` and printed under the table.

Outputs
-------
- ``tables/paillier_sqn_table1.md``: per cell the published value, ours and the deviation (epochs, loss, AUC),
  with seconds per run; then the traffic per iteration next to the poster's formulas, 3|S| + 2|S_H|/L
  ciphertexts between A and B and (2 + 1/L) n values with C (n = model coefficients); then, when
  plaintext-mode runs (``encrypted: false``) exist, their epochs over seeds.
- ``plots/data/paillier_sqn_loss.csv`` and ``plots/paillier_sqn_loss.png``: the decrypted epoch loss of every
  encrypted run, SGD against SQN per dataset and batch size.

Claims, all stated by the poster: in every (dataset, batch) row SQN needs fewer epochs than SGD (Table 1; at
lam = 0.01 encrypted, and at lam = 0 in plaintext mode), decided by t on the per-seed epoch differences (one
seed shows nothing); SQN's communication per iteration is at most 1 + 1/L times SGD's (its communication-cost
paragraph; exact counts); every encrypted run's loss and test AUC match the published cell within the sampling
error of the difference (:data:`LOSS_SE`, :data:`TEST_CLASSES`; :func:`ppml.report.stats.against_published`).

References
----------
K. Yang, T. Fan, T. Chen, Y. Shi, Q. Yang, "A Quasi-Newton Method Based Vertical Federated Learning Framework
for Logistic Regression", arXiv:1912.00513, 2019, Table 1.
"""

from __future__ import annotations

import csv
from typing import Any

from ppml.report import stats
from ppml.report.statements import Statement
from ppml.report.base import (DATA, FAIL, NOT_CHECKED, NOT_SHOWN, PASS, POWER, PROPERTY, READING, Claim,
                              ReportOutput, Run, Runs, markdown_table, why_not)

PAPER = "paillier_sqn"
PUBLISHED = ("published", "paillier_sqn_table1.csv")  # under the report root
DATASETS = {"default_credit": "Credit 1", "give_credit": "Credit 2"}
BATCHES = (1000, 3000)
METHODS = {"paillier_sgd": "SGD", "paillier_sqn": "SQN"}
#: Tolerances of "our run reproduces Table 1's cell" (TOST: the whole 95 % interval of the difference inside):
#: - AUC 0.01: Table 1's own SGD and SQN AUCs of one setting, which the poster presents as the same accuracy,
#:   differ by up to 0.0095 (Credit 2, |S| = 3000); the FDML rows use 0.01 too;
#: - loss 1 % of the cell (relative, as the FDML log-loss rows): the poster's own SGD-SQN gaps are at most
#:   0.0004, far below what one run's sampling error can resolve;
#: - epochs 1: counts are whole epochs of FATE's stopping rule, which a loss path a little lower or higher
#:   meets one epoch earlier or later.
MATCH_AUC, MATCH_LOSS, MATCH_EPOCHS = 0.01, 0.01, 1.0
MATCH_REASON = ("Tolerances: AUC as large as Table 1's own SGD-SQN gap (0.0095); loss 1 % as the FDML rows; one "
                "epoch of the stopping rule. The poster reports no error for its numbers, so the interval is ours "
                "alone.")
#: Sampling errors of ours against Table 1. The poster's numbers come from another sample of the same data (its
#: own rows, split and seed) and it reports no error for them, so the difference is known up to ours alone
#: (:func:`ppml.report.stats.against_published` with no published error):
#: - loss (a mean over the training rows): the standard error of that mean, per-row sd / sqrt(n), with the
#:   per-row Taylor loss of the Taylor-optimal model on our training rows (sd 0.445 over 23 520 rows of Credit 1,
#:   0.407 over 117 600 of Credit 2): 0.0029 and 0.0012;
#: - AUC (on our held-out rows): Hanley-McNeil's standard error of our AUC on the test split's classes
#:   (:data:`TEST_CLASSES`).
LOSS_SE = {"default_credit": 0.0029, "give_credit": 0.0012}
#: (positives, negatives) of our held-out split: 20 % of the aligned rows, stratified (Credit 1: 5 880 rows,
#: 22.1 % positive; Credit 2: 29 400 rows, 6.7 % positive; the centralized runs' n_test and majority error).
TEST_CLASSES = {"default_credit": (1302, 4578), "give_credit": (1963, 27437)}

#: How eta and lam of the encrypted runs were chosen: nobody wrote it down when they were chosen; this is the
#: rule reconstructed afterwards from a plaintext grid on training data (printed under Table 1; the same text
#: is a comment in params.yaml).
SELECTION_RULE = (
    "reconstructed after the fact, not recorded when the values were chosen. η: with λ = 0.01 fixed, run "
    "plaintext SGD at |S| = 1000 over η ∈ {0.05, 0.1, 0.15, 0.2, 0.3} (Credit 1) and {0.02, 0.05, 0.1} "
    "(Credit 2) and take the smallest η whose final training loss is within the stopping tolerance "
    "tol = 1e-4 of the grid's lowest; SQN uses the same η. This gives η = 0.15 (Credit 1: "
    "0.2 is lowest, 0.15 is 2e-5 above it, 0.1 is 1.8e-4 above) and η = 0.05 (Credit 2: 0.1 is lowest, 0.05 "
    "is 8.7e-5 above, 0.02 is 3.5e-4 above). The same rule at λ = 0 or 0.001 gives η = 0.1 on Credit 2, and "
    "the simpler rules (lowest loss; lowest SGD + SQN loss; fewest epochs; highest training AUC) do not give "
    "both values, so the rule fits the chosen values only narrowly and its differences are of the order of "
    "the stopping tolerance. λ: no training-data criterion we tried selects λ = 0.01 from {0, 0.001, 0.01} "
    "(the penalized loss is lowest at λ = 0 by construction; training AUCs differ by ≤ 1e-4): λ = 0.01 is an "
    "unexplained prior choice, which is why the λ = 0 columns (objective (1) as printed) stand beside it."
)

#: How eta moves with the batch size: one stated rule, checked on plaintext runs (bit-identical arithmetic).
BATCH_RULE = (
    "η at another batch size follows the square-root rule η_|S| = η_1000 √(|S| / 1000) (the gradient's noise "
    "falls as 1/√|S|), for SGD and SQN alike, encrypted and λ = 0: at |S| = 3000, η = 0.15 √3 = 0.2598 "
    "(Credit 1) and 0.05 √3 = 0.0866 (Credit 2). Before, |S| = 3000 reused η_1000. Measured in plaintext mode "
    "(frac_bits = 16, λ = 0.01) against that reuse: SGD 29 → 16 epochs on Credit 1 (poster 18) and 18 → 10 on "
    "Credit 2 (poster 14), with final loss lower (0.49774 → 0.49718, 0.31581 → 0.31553) and test AUC higher "
    "(0.7201 → 0.7209, 0.6904 → 0.6918); SQN 8 → 6 and 5 → 5 epochs, loss within 1e-5 and test AUC within "
    "0.0008 (0.7215 → 0.7214, 0.7075 → 0.7067)."
)

#: Why 16 fractional bits of the plaintext factors, not FATE's 23: a measurement, not a guess.
FRAC_BITS_NOTE = (
    "Plaintext factors (features, loss coefficients) carry frac_bits = 16 fractional bits, FATE's 23 less 7: "
    "the products' exponents are 7 bits shorter. Measured on all eight Table 1 settings in plaintext mode "
    "(the same integers as encrypted) at 23 and at 16 bits: the same epochs, final losses equal to 6 digits and "
    "test AUCs within 2e-6. Encrypted values (u_A, d, masks) carry 22 fractional bits, not a float64's 52: "
    "measured the same way, the same epochs, final losses within 2e-8 and test AUCs within 2e-7; every packed "
    "slot is then 30 bits narrower."
)

#: What packing changes in the threat model (the runs say their packing in the settings line).
PACKING_NOTE = (
    "Packing (`packing: auto`: t rows per ciphertext, the largest t whose 2t − 1 slots fit the key, "
    "t = 7 at |S| = 1000 and 3000 with 2048-bit keys; src/ppml/crypto/packing.py): [u_A] and [d] "
    "travel as ⌈|S|/t⌉ ciphertexts, the products X^T [d] are computed slot by slot, and what C decrypts holds "
    "the wanted sum in one slot and cross terms in the other 2t − 2. The key stays 2048-bit; what changes is "
    "that those other slots are hidden from C statistically, by fresh uniform masks of mask_bits = 80 bits "
    "beyond their values (statistical distance 2^−80 per slot), instead of by the encryption. The models, "
    "losses and gradients are the same integers as unpacked (a test checks the runs bit for bit)."
)


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


def _runs(runs: Runs, *, encrypted: bool, lam0: bool = False) -> dict[tuple[str, int, str], Run]:
    """One run per (dataset, batch, method): encrypted (Table 1), or plaintext with lam = 0 (`lam0`), or
    plaintext with lam != 0 (the seeds study)."""
    found = {}
    for dataset in DATASETS:
        for batch in BATCHES:
            for method in METHODS:
                match = [r for r in runs.select(algorithm=method, dataset=dataset, batch_size=batch,
                                                encrypted=encrypted)
                         if encrypted or (r.get("lam") == 0) == lam0]
                if len(match) > 1:
                    raise LookupError(f"{len(match)} runs match {(dataset, batch, method)}: "
                                      f"{[r.name for r in match]}")
                if match:
                    found[(dataset, batch, method)] = match[0]
    return found


def _why_missing(run: Run | None) -> str:
    if run is None:
        return "not run: no such experiment in params/paillier_*.yaml"
    return str(run.metrics.get("status"))


def _deviation(ours: float | None, published: float | None) -> float | None:
    return None if ours is None or published is None else ours - published


def _count(value: float | None) -> str | None:
    """A count for display: whole numbers without decimals (metrics store means over seeds as floats)."""
    return None if value is None else f"{value:g}" if float(value).is_integer() else f"{value:.1f}"


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.0f}"


def _lam0_cells(run: Run | None) -> list[Any]:
    """Epochs, loss and test AUC of the plaintext lam = 0 run (objective (1) as printed)."""
    if run is None or not run.available:
        return [_why_missing(run) if run is not None else "not run", None, None]
    m = run.metrics
    return [_count(m.get("epochs")) + ("" if m.get("converged") else " (cap)"), m.get("loss"), m.get("test_auc")]


def _table1(table: dict, published: dict, lam0: dict | None = None) -> str:
    lam0 = lam0 or {}
    header = ["dataset", "batch", "method", "epochs (pub.)", "epochs (ours)", "loss (pub.)", "loss (ours)",
              "Δ loss", "AUC (pub.)", "AUC (ours, test)", "Δ AUC", "AUC (ours, train)", "converged",
              "seconds", "run", "epochs (λ=0)", "loss (λ=0)", "AUC (λ=0, test)"]
    rows = []
    for dataset, name in DATASETS.items():
        for batch in BATCHES:
            for method, label in METHODS.items():
                pub = published.get((dataset, batch, method), {})
                run = table.get((dataset, batch, method))
                head = [name, batch, label, pub.get("epochs")]
                zero = _lam0_cells(lam0.get((dataset, batch, method)))
                if run is None or not run.available:
                    rows.append(head + [_why_missing(run), pub.get("loss"), None, None, pub.get("auc"), None,
                                        None, None, None, None, run.name if run else None] + zero)
                    continue
                m = run.metrics
                rows.append(head + [_count(m.get("epochs")), pub.get("loss"), m.get("loss"),
                                    _deviation(m.get("loss"), pub.get("loss")), pub.get("auc"),
                                    m.get("test_auc"), _deviation(m.get("test_auc"), pub.get("auc")),
                                    m.get("train_auc"), m.get("converged"), _seconds(run.get("seconds")),
                                    run.name] + zero)
    return markdown_table(header, rows)


def _total_time(table: dict) -> str:
    """The summed wall time of the encrypted runs: the time Table 1 takes to reproduce."""
    done = [run for run in table.values() if run is not None and run.available]
    seconds = sum(run.get("seconds") or 0.0 for run in done)
    return (f"Time: the {len(done)} encrypted runs took {seconds:.0f} s ({seconds / 60:.1f} min) in total (the sum of "
            "their `seconds`: wall time of key generation, training and evaluation; loading the data excluded).")


def _settings(table: dict) -> str:
    """The parameters the encrypted runs share (or their spread), for the table's notes."""
    keys = ("eta", "decay", "lam", "tol", "max_epochs", "L", "M", "S_H", "key_bits", "scheme", "frac_bits",
            "shuffle", "host_squares", "update_at", "packing", "packing_slots", "mask_bits", "transport")
    parts = []
    for key in keys:
        values = sorted({repr(r.get(key)) for r in table.values() if r.available and key in r.metrics})
        if values:
            parts.append(f"{key} = {' / '.join(values)}")
    return "; ".join(parts) if parts else "no encrypted run available"


def _traffic(table: dict) -> str:
    # "|" would end a markdown cell: the formula's bars are escaped.
    header = ["dataset", "batch", "method", "packing t", "A↔B ciphertexts / it. (ours, packed)",
              "A↔B ciphertexts / it. (ours, unpacked)", r"3\|S\| + 2\|S_H\|/L (poster)",
              "A↔B kB / it.", "ciphertexts to C / it. (ours)", "values from C / it. (ours)",
              "(2 + 1/L) n (poster)", "C kB / it."]
    rows = []
    for (dataset, batch, method), run in sorted(table.items()):
        if not run.available:
            continue
        m = run.metrics
        rows.append([DATASETS[dataset], batch, METHODS[method], m.get("packing_slots", 1),
                     _count(m.get("ab_ciphertexts_per_iteration")),
                     _count(m.get("ab_ciphertexts_per_iteration_unpacked")),
                     _count(m.get("poster_ab_per_iteration")),
                     _count(m.get("ab_bytes_per_iteration", 0) / 1e3),
                     _count(m.get("arbiter_ciphertexts_per_iteration")), m.get("n_parameters"),
                     _count(m.get("poster_arbiter_per_iteration")),
                     _count(m.get("arbiter_bytes_per_iteration", 0) / 1e3)])
    if not rows:
        return "No encrypted run available."
    return markdown_table(header, rows)


EXTRA_NOTES = """\
SQN's extra communication over SGD, per iteration: the poster states that with |S_H| ≤ |S| SQN adds no more
than 1/L to SGD's cost per round, i.e. SQN / SGD ≤ 1 + 1/L in encrypted numbers exchanged (A↔B and with C).
Ours counts every ciphertext sent (unpacked counts, the protocol the poster describes, and the packed counts
actually sent); the ratio is exact for the runs' batch schedules (margin 0).
"""


def _ratio(table: dict, dataset: str, batch: int, field: str) -> float | None:
    """SQN / SGD of A<->B plus C ciphertexts per iteration (`field`: '' packed or '_unpacked')."""
    sgd, sqn = (table.get((dataset, batch, method)) for method in METHODS)
    if sgd is None or sqn is None or not (sgd.available and sqn.available):
        return None

    def total(run: Run) -> float | None:
        ab = run.metrics.get(f"ab_ciphertexts_per_iteration{field}")
        c = run.metrics.get("arbiter_ciphertexts_per_iteration")
        return None if ab is None or c is None else ab + c

    low, high = total(sgd), total(sqn)
    return None if not low or high is None else high / low


def _extra(table: dict) -> str:
    rows = []
    for dataset, name in DATASETS.items():
        for batch in BATCHES:
            sqn = table.get((dataset, batch, "paillier_sqn"))
            if sqn is None or not sqn.available:
                continue
            unpacked, packed = (_ratio(table, dataset, batch, f) for f in ("_unpacked", ""))
            rows.append([name, batch, sqn.metrics.get("L"), None if unpacked is None else f"{unpacked:.3f}",
                         None if packed is None else f"{packed:.3f}", f"{1 + 1 / sqn.metrics['L']:.3f}"])
    if not rows:
        return "No encrypted SQN run available."
    return markdown_table(["dataset", "batch", "L", "SQN / SGD (ours, unpacked)", "SQN / SGD (ours, packed)",
                           "1 + 1/L (poster's bound)"], rows)


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
    out.plot_data("paillier_sqn_loss", rows, series=("dataset", "batch_size", "method"))
    out.figure("paillier_sqn_loss", fig, tight_layout=True)


SOURCE = "Paillier SQN poster (arXiv 1912.00513)"
TABLE = "reports/tables/paillier_sqn_table1.md"
#: Seeds a seed-variance comparison of one-seed runs would need (named in its explanation).
SEEDS_NEEDED = 5


def _claim(claim_id: str, statement: str, source: str, published: str, ours: str, verdict: str,
           margin: str = "", *, why: tuple[str, str, list[str]] | None = None) -> Claim:
    """A paper claim; `why` = (cause, explanation, evidence paths), kept only for a FAIL or NOT SHOWN verdict."""
    return Claim(id=claim_id, paper=PAPER, statement=statement, published=published, ours=ours, verdict=verdict,
                 margin=margin, source=f"{SOURCE}, {source}",
                 **(why_not(verdict, why[0], why[1], *why[2]) if why else {}))


def _all(verdicts: list[str]) -> str:
    """Conjunction: FAIL if any fails, PASS if all pass, else NOT SHOWN."""
    return FAIL if FAIL in verdicts else PASS if all(v == PASS for v in verdicts) else NOT_SHOWN


def seed_epochs(run: Run) -> list[float]:
    """Epochs of each seed of `run` (its last history record), or the run's own count without a history."""
    seeds = [s.get("records") for s in (run.history or {}).get("runs") or [] if s.get("records")]
    return [float(recs[-1]["epoch"]) for recs in seeds] or [float(run.metrics["epochs"])]


def _fewer_epochs(claim_id: str, statement: str, source: str, pub_text: str, runs: list[Run | None],
                  seeds: list[Run | None] = ()) -> Claim:
    """SGD's epochs above SQN's beyond the t half-width of the per-seed differences. `seeds`: plaintext-mode
    twins of `runs` (the same arithmetic, identity encryption) whose seeds decide instead when both have more
    seeds than `runs`."""
    missing = [r for r in runs if r is None or not r.available]
    if missing:
        return _claim(claim_id, statement, source, pub_text,
                      "; ".join(_why_missing(r) if r is not None else "not run: no such experiment in params/paillier_*.yaml"
                                for r in missing), NOT_CHECKED)
    sgd, sqn = runs
    e_sgd, e_sqn = seed_epochs(sgd), seed_epochs(sqn)
    twins = "" if len(seeds) != 2 or any(r is None or not r.available for r in seeds) else \
        " (epochs per seed from the plaintext twins " + ", ".join(r.name for r in seeds) + ")"
    if twins and min(len(seed_epochs(r)) for r in seeds) > len(e_sgd):
        e_sgd, e_sqn = (seed_epochs(r) for r in seeds)
    else:
        twins = ""
    # the seed fixes the partition into mini-batches; SGD and SQN of a row run the same seeds: paired
    est = stats.paired(e_sgd, e_sqn) if len(e_sgd) == len(e_sqn) else stats.unpaired(e_sgd, e_sqn)
    ours = (f"SGD {_count(sgd.metrics['epochs'])} vs SQN {_count(sqn.metrics['epochs'])} epochs, "
            f"{len(e_sgd)} seed(s){twins} (converged: {sgd.metrics['converged']}, {sqn.metrics['converged']})")
    evidence = [TABLE, sgd.evidence, sqn.evidence]
    if not sqn.metrics["converged"]:
        verdict = NOT_SHOWN
        why = (POWER, f"SQN stopped at its epoch cap ({_count(sqn.metrics['epochs'])}) before FATE's stopping rule "
                      "held, so its count is only a lower bound; a higher max_epochs would resolve it.", evidence)
    else:
        verdict = stats.verdict(est.value, est.half_width, stats.GREATER)
        if verdict == FAIL:
            why = (PROPERTY, "SQN needed more epochs than SGD to meet FATE's stopping rule at these settings.",
                   evidence)
        elif len(e_sgd) < 2:
            why = (POWER, f"each run has one seed, which fixes its mini-batch partition, so the seed spread of the "
                          f"epoch counts is unknown; {SEEDS_NEEDED} seeds of both in plaintext mode (encrypted: "
                          "false, the same arithmetic) would decide it.", evidence)
        else:
            why = (POWER, f"the epoch difference lies inside the t interval of {len(e_sgd)} seeds; more seeds "
                          "would resolve it.", evidence)
    return _claim(claim_id, statement, source, pub_text, ours, verdict,
                  f"SGD minus SQN epochs above the half-width ({est.text}); SQN must have converged (an SGD run "
                  "stopped by its cap took at least that many epochs)", why=why)


def _extra_claim(table: dict, dataset: str, batch: int) -> Claim:
    """The poster's bound on SQN's extra communication per round, on the unpacked counts."""
    name = DATASETS[dataset]
    claim_id = f"paillier_sqn-{dataset}-b{batch}-extra-communication"
    statement = (f"{name}, |S| = {batch}: with |S_H| ≤ |S|, SQN exchanges at most 1 + 1/L times SGD's encrypted "
                 "numbers per iteration (no more than 1/L extra per round)")
    source = "'Communication Costs of Each Iteration'"
    sqn = table.get((dataset, batch, "paillier_sqn"))
    ratio = _ratio(table, dataset, batch, "_unpacked")
    if ratio is None or sqn is None:
        return _claim(claim_id, statement, source, "≤ 1 + 1/L", "an encrypted SGD or SQN run is missing",
                      NOT_CHECKED)
    bound = 1 + 1 / sqn.metrics["L"]
    verdict = PASS if ratio <= bound * (1 + 1e-12) else FAIL
    return _claim(claim_id, statement, source, f"≤ {bound:.3f} (L = {sqn.metrics['L']})",
                  f"{ratio:.3f} (unpacked counts; packed {_ratio(table, dataset, batch, ''):.3f})", verdict,
                  "0: counts per iteration are exact for the batch schedule (equality meets the bound)",
                  why=(PROPERTY, f"SQN sends {ratio:.3f} times SGD's ciphertexts per iteration, above the poster's "
                                 f"1 + 1/L = {bound:.3f}.", [TABLE]))


def _part(name: str, est: stats.Estimate, tolerance: float) -> tuple[str, str, str]:
    """One part of a Table 1 cell's row: (its name, its text, its TOST verdict)."""
    verdict = stats.equivalent(est.value, est.half_width, tolerance)
    return name, f"{name} Δ {est.value:+.4g} ± {est.half_width:.3g} inside ±{tolerance:.3g}: {verdict}", verdict


def _matches(claim_id: str, statement: str, dataset: str, pub: dict[str, Any], run: Run,
             twin: Run | None) -> Claim:
    """A Table 1 cell: our final loss, test AUC and epoch count each equivalent to the cell's (TOST, the whole
    95 % interval of the difference inside the tolerance stated in :data:`MATCH_LOSS` / :data:`MATCH_AUC` /
    :data:`MATCH_EPOCHS`); the poster reports no error for its numbers, so the interval is ours alone."""
    m = run.metrics
    n_pos, n_neg = TEST_CLASSES[dataset]
    loss = stats.against_published([m["loss"]], pub["loss"], se_published=0.0, se_metric=LOSS_SE[dataset])
    auc = stats.against_published([m["test_auc"]], pub["auc"], se_published=0.0,
                                  se_metric=stats.auc_se(m["test_auc"], n_pos, n_neg))
    # epochs: the seed spread of the plaintext twin (the same arithmetic, identity encryption, 5 seeds) when
    # there is one; the encrypted run's single seed has none
    seeds = seed_epochs(twin) if twin is not None and twin.available else []
    epochs = stats.against_published(seeds or seed_epochs(run), float(pub["epochs"]), se_published=0.0)
    parts = [_part("loss", loss, MATCH_LOSS * pub["loss"]), _part("AUC", auc, MATCH_AUC),
             _part("epochs", epochs, MATCH_EPOCHS)]
    verdict = _all([v for _, _, v in parts])
    ours = (f"loss {m['loss']:.6f}, test AUC {m['test_auc']:.4f}, {_count(m['epochs'])} epochs"
            + (f" (plaintext twin: {', '.join(_count(e) for e in seeds)} over {len(seeds)} seeds)" if seeds else "")
            + ". " + "; ".join(text for _, text, _ in parts))
    margin = (f"TOST per part, the whole 95 % interval inside the tolerance: loss ±{MATCH_LOSS:.0%} of the cell "
              f"({loss.text}); AUC ±{MATCH_AUC} (Hanley-McNeil on {n_pos} + {n_neg} test rows: {auc.text}); "
              f"epochs ±{MATCH_EPOCHS} ({epochs.text}). {MATCH_REASON} The row is the conjunction of its parts")
    evidence = [TABLE, run.evidence] + ([twin.evidence] if seeds else [])
    failed = [name for name, _, v in parts if v == FAIL]
    undecided = [name for name, _, v in parts if v == NOT_SHOWN]
    if failed:
        why = (READING, f"ours differ from Table 1's beyond the tolerance in: {', '.join(failed)}; the poster gives "
                        "neither η, λ, M nor its split, so these settings are our reading.", evidence)
    else:
        why = (POWER, f"the 95 % interval straddles the tolerance in: {', '.join(undecided)}; our error on our "
                      "rows is as wide as the tolerance (the AUC's is the test split's and does not shrink with "
                      "seeds), so equivalence is not shown.", evidence)
    return _claim(claim_id, statement, "Table 1",
                  f"loss {pub['loss']:.6f}, AUC {pub['auc']:.4f}, {pub['epochs']} epochs", ours, verdict, margin,
                  why=why)


def _claims(table: dict, published: dict, lam0: dict | None = None, plain: dict | None = None) -> list[Claim]:
    lam0, plain = lam0 or {}, plain or {}
    claims = []
    for dataset, name in DATASETS.items():
        for batch in BATCHES:
            pub_sgd = published.get((dataset, batch, "paillier_sgd"), {}).get("epochs")
            pub_sqn = published.get((dataset, batch, "paillier_sqn"), {}).get("epochs")
            runs = [table.get((dataset, batch, method)) for method in METHODS]
            pub_text = f"SGD {pub_sgd} vs SQN {pub_sqn} epochs"
            source = f"Table 1 ({name}, |S| = {batch}) and Conclusions"
            claims.append(_fewer_epochs(f"paillier_sqn-{dataset}-b{batch}-fewer-epochs",
                                        f"{name}, |S| = {batch}: SQN converges in fewer epochs than SGD",
                                        source, pub_text, runs,
                                        [plain.get((dataset, batch, method)) for method in METHODS]))
            if lam0:
                claims.append(_fewer_epochs(
                    f"paillier_sqn-{dataset}-b{batch}-lam0-fewer-epochs",
                    f"{name}, |S| = {batch}, objective (1) as printed (λ = 0, plaintext mode): SQN converges in "
                    "fewer epochs than SGD", f"{source}; objective (1)", pub_text,
                    [lam0.get((dataset, batch, method)) for method in METHODS]))
            claims.append(_extra_claim(table, dataset, batch))
            for method, run in zip(METHODS, runs):
                pub = published.get((dataset, batch, method))
                statement = (f"{name}, |S| = {batch}, {METHODS[method]}: Table 1's cell (final loss, test AUC, "
                             "epochs to FATE's stopping rule) is reproduced: each of ours is equivalent to it within "
                             "a tolerance stated in advance")
                claim_id = f"paillier_sqn-{dataset}-b{batch}-{method}-matches"
                if pub is None:
                    claims.append(_claim(claim_id, statement, "Table 1", "no published cell", "", NOT_CHECKED))
                elif run is None or not run.available:
                    claims.append(_claim(claim_id, statement, "Table 1",
                                         f"loss {pub['loss']:.6f}, AUC {pub['auc']:.4f}", _why_missing(run),
                                         NOT_CHECKED))
                else:
                    claims.append(_matches(claim_id, statement, dataset, pub, run,
                                           plain.get((dataset, batch, method))))
    return claims + _attributes_claims(table) + _cost_claims(table)


NOTES = """\
Ours: the encrypted runs (`encrypted: true`) of `paillier_sgd` / `paillier_sqn`. Loss is the protocol's own
decrypted Taylor loss, log 2 − ½ y wᵀx + ⅛ (wᵀx)² plus λ/2‖w‖² (no penalty on the intercept), averaged over
the last epoch's mini-batches as FATE reports it; epochs count until FATE's rule |loss_e − loss_(e−1)| < tol.
AUC is measured on our held-out 20 % split (stratified, after PSI alignment); the poster does not say on which
rows its AUC was computed, so the training-set AUC is listed too. The poster gives neither its learning rate,
its L2 weight nor its memory M: ours are listed below. Settings: {settings}.
"""

LAM0_NOTES = """\
The λ = 0 columns: objective (1) of the poster as printed (no regularizer), run in plaintext mode
(`encrypted: false`: the same fixed-point protocol with identity encryption, bit-identical to an encrypted run
of the same settings) with every other setting as the encrypted λ = 0.01 run of the row; "(cap)" marks a run
stopped by max_epochs.
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
    lam0 = _runs(runs, encrypted=False, lam0=True)
    parts = ["# Table 1 of the FATE quasi-Newton poster: encrypted SGD vs SQN", "",
             NOTES.format(settings=_settings(table)), LAM0_NOTES, _table1(table, published, lam0), "",
             "How η and λ were chosen: " + SELECTION_RULE, "", BATCH_RULE, "", FRAC_BITS_NOTE, "",
             PACKING_NOTE, "", _total_time(table), "",
             "## Communication per iteration", "", TRAFFIC_NOTES, _traffic(table), "", EXTRA_NOTES,
             _extra(table)]
    seeds = _runs(runs, encrypted=False, lam0=False)
    plain = _plaintext(seeds)
    if plain is not None:
        parts += ["", "## Plaintext mode over seeds (same arithmetic, identity encryption)", "", plain]
    if not published:
        parts += ["", f"Published numbers not found ({'/'.join(PUBLISHED)} under the report root)."]
    out.table("paillier_sqn_table1", "\n".join(parts))
    _curves(table, out)
    return _claims(table, published, lam0, seeds)


#: the poster's attribute counts ('Experiments': Credit 1 n = 25, Credit 2 10)
POSTER_ATTRIBUTES = {"default_credit": 25, "give_credit": 10}
#: per-iteration counts average over an epoch's batches, whose last is smaller than |S|: equal within this
COUNT_TOLERANCE = 0.05


def _attributes_why(ours: int, poster: int) -> str:
    diff = poster - ours
    return (f"the file has {ours} feature columns; the poster's n = {poster} counts {abs(diff)} "
            f"{'more' if diff > 0 else 'fewer'}" + (", as the columns ID and label of the UCI file would" if diff == 2
                                                    else ""))


def _attributes_claims(table: dict) -> list[Claim]:
    """'Experiments': the data sets' attribute counts against ours (the model's parameters less the intercept)."""
    out = []
    for dataset, name in DATASETS.items():
        cid = f"paillier_sqn-{dataset}-attributes"
        run = next((r for (d, _, _), r in sorted(table.items()) if d == dataset and r.available), None)
        statement = f"{name} has n = {POSTER_ATTRIBUTES[dataset]} attributes"
        if run is None:
            out.append(_claim(cid, statement, "'Experiments'", f"n = {POSTER_ATTRIBUTES[dataset]}",
                              f"not checked: no encrypted run on {name}", NOT_CHECKED))
            continue
        ours = int(run.metrics["n_parameters"]) - 1
        verdict = PASS if ours == POSTER_ATTRIBUTES[dataset] else FAIL
        out.append(_claim(cid, statement, "'Experiments'", f"n = {POSTER_ATTRIBUTES[dataset]}",
                          f"{ours} feature columns (the model's {ours + 1} parameters less the intercept)", verdict,
                          "exact", why=(DATA, _attributes_why(ours, POSTER_ATTRIBUTES[dataset]),
                                        [TABLE, run.evidence])))
    return out


def _cost_claims(table: dict) -> list[Claim]:
    """'Communication Costs of Each Iteration': ours counted (unpacked: one ciphertext per number) against the
    poster's formulas, A<->B and to the coordinator."""
    out = []
    for (dataset, batch, method), run in sorted(table.items()):
        cid = f"paillier_sqn-{dataset}-b{batch}-{method}-cost-per-iteration"
        label = f"{DATASETS[dataset]}, |S| = {batch}, {METHODS[method]}"
        statement = (f"{label}: per iteration the parties exchange the poster's count of encrypted numbers (SGD "
                     "3|S| between A and B and 2n with the coordinator; SQN 3|S| + 2|S_H|/L and (2 + 1/L)n)")
        m = run.metrics if run.available else {}
        keys = ("ab_ciphertexts_per_iteration_unpacked", "arbiter_ciphertexts_per_iteration",
                "poster_ab_per_iteration", "poster_arbiter_per_iteration")
        if not all(isinstance(m.get(k), (int, float)) for k in keys):
            out.append(_claim(cid, statement, "'Communication Costs of Each Iteration'", "the poster's formulas",
                              f"not checked: {run.name} lacks the counts", NOT_CHECKED))
            continue
        ab, arb, pab, parb = (float(m[k]) for k in keys)
        ok = abs(ab / pab - 1) <= COUNT_TOLERANCE and abs(arb / parb - 1) <= COUNT_TOLERANCE
        out.append(_claim(cid, statement, "'Communication Costs of Each Iteration'",
                          f"A↔B {pab:g}, coordinator {parb:g}", f"A↔B {ab:.0f}, coordinator {arb:.1f} (unpacked)",
                          PASS if ok else FAIL,
                          f"each count within ±{COUNT_TOLERANCE:.0%} of the formula (an epoch's last batch is "
                          "smaller than |S|)",
                          why=(READING, f"ours sends {ab / pab:.2f} times the poster's A↔B count and "
                                        f"{arb / parb:.2f} "
                                        "times its coordinator count per iteration (Hardy et al.'s masked flow, "
                                        f"host_squares: {run.get('host_squares') or 'sum'}); the poster does not "
                                        "say which messages it counts", [TABLE, run.evidence])))
    return out


# --- the ledger's statements (ppml.report.statements): one row per thing the poster states ----------------

def _cells(template: str, name: str = "") -> tuple[tuple[str, str], ...]:
    return tuple((template.format(dataset=dataset, batch=batch), f"{label}, |S| = {batch}{name}")
                 for dataset, label in DATASETS.items() for batch in BATCHES)


STATEMENTS = [
    Statement("paillier_sqn-fewer-epochs", "SQN converges in fewer epochs than SGD (Table 1, Conclusions), with "
              "FATE's penalty and with objective (1) as printed (λ = 0)",
              _cells("paillier_sqn-{dataset}-b{batch}-fewer-epochs")
              + _cells("paillier_sqn-{dataset}-b{batch}-lam0-fewer-epochs", ", λ = 0")),
    Statement("paillier_sqn-extra-communication", "SQN exchanges at most 1/L more encrypted numbers per "
              "iteration than SGD ('Communication Costs of Each Iteration')",
              _cells("paillier_sqn-{dataset}-b{batch}-extra-communication")),
    Statement("paillier_sqn-attributes", "The data sets have n = 25 (Credit 1) and 10 (Credit 2) attributes "
              "('Experiments')", tuple((f"paillier_sqn-{d}-attributes", label) for d, label in DATASETS.items())),
    Statement("paillier_sqn-cost-per-iteration", "Per iteration SGD exchanges 3|S| encrypted numbers between A "
              "and B and 2n with the coordinator, SQN 3|S| + 2|S_H|/L and (2 + 1/L)n ('Communication Costs of "
              "Each Iteration')", tuple((f"paillier_sqn-{d}-b{b}-{m}-cost-per-iteration",
                                         f"{label}, |S| = {b}, {METHODS[m]}")
                                        for d, label in DATASETS.items() for b in BATCHES for m in METHODS)),
    *(Statement(f"paillier_sqn-{label.lower()}-table1-reproduced",
                f"Table 1's {label} cells (final loss, test AUC, epochs) are reproduced: each of ours equivalent "
                "to the poster's within a tolerance stated in advance",
                _cells(f"paillier_sqn-{{dataset}}-b{{batch}}-{method}-matches"))
      for method, label in METHODS.items()),
]
