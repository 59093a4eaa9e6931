"""The account stage's work: for every run with privacy events, the paper's bound and a tight bound side by side.

A run is given an epsilon only when its ledger says the assumptions behind the sensitivity were enforced
(``certified``). A fixed-noise run (the papers' figure sweeps) is listed with its noise level and
``"epsilon": null`` and the reason; a run whose ledger only notes that it adds no noise is listed without a
differential-privacy claim (encryption, where a protocol uses it, is a different guarantee).
"""

from __future__ import annotations

from typing import Any

from ppml.privacy import paper_bounds
from ppml.privacy.events import event_from_dict


def account_run(name: str, block: dict[str, Any], ledger: dict[str, Any]) -> dict[str, Any] | None:
    """privacy.json's entry for one run, or None when the run has no privacy side (no events, no notes).

    A fixed-noise run records no events (its sensitivity is not bounded) but notes why; it is listed with
    its noise level and no epsilon.
    """
    seeds = ledger.get("runs", [])
    if not seeds or not any(s.get("events") or s.get("notes") for s in seeds):
        return None
    first = seeds[0]
    entry: dict[str, Any] = {
        "name": name, "algorithm": block.get("algorithm"), "dataset": block.get("dataset"),
        "seeds": len(seeds), "certified": bool(first.get("certified")),
        "target_epsilon": first.get("target_epsilon"), "delta": first.get("delta"),
        "notes": first.get("notes", []),
        "noise": _noise_summary(first["events"], block),
        "paper": None, "tight": None,
    }
    if not all(bool(s.get("certified")) for s in seeds):
        entry["certified"] = False
        noise = entry["noise"]
        noisy = bool(noise["releases"]) or any(key in noise for key in ("sigma", "sigma_max"))
        entry["status"] = ("not certified: fixed noise level or assumptions not enforced in this run" if noisy
                           else "no differential privacy: this run adds no noise")
        return entry
    delta = first.get("delta")
    if delta is None:
        raise ValueError(f"{name}: certified ledger without delta")
    if first.get("paper_bound"):
        entry["paper"] = paper_bounds.evaluate(first["paper_bound"])
    from ppml.privacy.accountants import tight_epsilon

    # every seed spends its own budget on its own run; the guarantee is per run, so take the worst seed
    tights = [tight_epsilon([event_from_dict(e) for e in s["events"]], delta) for s in seeds]
    entry["tight"] = max(tights, key=lambda t: t["epsilon"])
    entry["status"] = "certified"
    return entry


def _noise_summary(events: list[dict[str, Any]], block: dict[str, Any]) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    sigmas = set()
    for e in events:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + int(e.get("count", 1))
        if e["kind"] == "gaussian":
            sigmas.add(float(e["sigma"]))
    out: dict[str, Any] = {"releases": kinds}
    if len(sigmas) == 1:
        out["sigma"] = sigmas.pop()
    elif sigmas:
        out["sigma_min"], out["sigma_max"] = min(sigmas), max(sigmas)
    elif block.get("sigma"):
        out["sigma"] = float(block["sigma"])  # a fixed noise level from params, released without events
    return out
