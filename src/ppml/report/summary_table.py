"""The short table of a paper's statements that opens its summary (the README, docs/results.md).

One row per paper statement of the ledger: the statement, where the paper says it, what it says, what we
measured (for a statement of several parts, its parts' verdicts), the verdict, and why when it is FAIL or NOT
SHOWN (its cause and the first deciding part's explanation; every explanation is in the full results).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from ppml.report.base import FAIL, NOT_SHOWN, PAPER_CLAIM, VERDICTS, short_source
from ppml.report.claims import cell as _cell


#: a statement's own ``ours`` longer than this is cut, in the summary, after its first "; "-separated piece
SHORT_OURS = 300


def parts_summary(claim: dict[str, Any]) -> str:
    """"3 PASS, 1 NOT CHECKED; shown, not counted: 1 FAIL" for a statement of parts; its ``ours`` otherwise,
    cut after its first piece when longer than SHORT_OURS (the rest is in the full results)."""
    parts = claim.get("parts") or []
    if not parts:
        ours = str(claim.get("ours") or "")
        pieces = ours.split("; ")
        if len(ours) <= SHORT_OURS or len(pieces) == 1:
            return ours
        return f"{pieces[0]} (and {len(pieces) - 1} more in the full results)"

    def tally(mine: list[dict[str, Any]]) -> str:
        n = Counter(p["verdict"] for p in mine)
        return ", ".join(f"{n[v]} {v}" for v in VERDICTS if n[v])

    counted = [p for p in parts if p.get("counted", True)]
    shown = [p for p in parts if not p.get("counted", True)]
    return f"parts: {tally(counted)}" + (f"; shown, not counted: {tally(shown)}" if shown else "")


def why(claim: dict[str, Any]) -> str:
    """The cause and explanation of a FAIL or NOT SHOWN statement ('' otherwise); for a statement of parts,
    the first deciding part's, and how many more decide it."""
    verdict = claim.get("verdict")
    if verdict not in (FAIL, NOT_SHOWN):
        return ""
    deciding = [p for p in claim.get("parts") or [] if p.get("counted", True) and p["verdict"] == verdict]
    if not deciding:
        return f"{claim.get('cause')}: {claim.get('explanation')}"
    first = deciding[0]
    more = f" (and {len(deciding) - 1} more part{'s' if len(deciding) > 2 else ''})" if len(deciding) > 1 else ""
    return f"{claim.get('cause')}: {first['name']}: {first.get('explanation')}{more}"


def statements_table(claims: list[dict[str, Any]], paper: str,
                     shorten: Callable[[str], str] = lambda text: text) -> list[str]:
    """The table of `paper`'s statements (kind paper) in ledger order; empty when it has none."""
    rows = [c for c in claims if c.get("paper") == paper and (c.get("kind") or PAPER_CLAIM) == PAPER_CLAIM]
    if not rows:
        return []
    lines = ["| statement | where | the paper | ours | verdict | why |", "|---|---|---|---|---|---|"]
    for c in rows:
        lines.append(f"| {_cell(c.get('statement'))} | {_cell(short_source(str(c.get('source') or '')))} | "
                     f"{_cell(c.get('published'))} | {_cell(shorten(parts_summary(c)))} | **{c.get('verdict')}** | "
                     f"{_cell(shorten(why(c)))} |")
    return lines
