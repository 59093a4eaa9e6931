"""Gathering the papers' claims: claims.json, claims.md and the counts (the DVC metric).

The ledger keeps two kinds of rows apart (``Claim.kind``): paper claims, which a paper states, and
diagnostics, our own checks. Every count, table and summary shows them apart; a paper claim that does not pass
has its cause, explanation and evidence in one table. The functions on ledger entries (``claims.json``'s dicts)
read older ledgers too: an entry without ``kind`` is a paper claim, one without ``verdict`` has the boolean
``pass`` of before verdicts.
"""

from __future__ import annotations

import importlib
import logging
import posixpath
from collections import Counter
from typing import Any

from ppml.report import PAPER_REPORTS
from ppml.report.base import (DIAGNOSTIC, FAIL, NOT_CHECKED, NOT_SHOWN, PAPER_CLAIM, PASS, VERDICTS, Claim,
                              ReportOutput, Runs)
from ppml.report.statements import Statement, group

log = logging.getLogger(__name__)


def build_all(runs: Runs, out: ReportOutput, modules: list[str] | None = None) -> list[Claim]:
    """Run every paper's report module; a module whose runs are absent still reports its claims as unchecked.

    A module's checks of one statement's readings become that statement's parts (:func:`group` with the
    module's ``STATEMENTS``, and those its ``statements(ids)`` returns for the ids it checked)."""
    claims: list[Claim] = []
    specs: list[Statement] = []
    for name in modules or PAPER_REPORTS:
        module = importlib.import_module(name)
        log.info("report: %s", name)
        mine = module.build(runs, out)
        claims.extend(mine)
        specs.extend(getattr(module, "STATEMENTS", ()))
        if hasattr(module, "statements"):
            specs.extend(module.statements([c.id for c in mine]))
    ids = [c.id for c in claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate claim ids: {duplicates}")
    return group(claims, specs)


# --- ledger entries (claims.json's dicts, of this or an older format) ---------------------------------------

def entry_verdict(entry: dict[str, Any]) -> str:
    """An entry's verdict in either format: ``verdict`` (today) or the older boolean/None ``pass``."""
    v = entry.get("verdict")
    if v in VERDICTS:
        return v
    passed = entry.get("pass")
    return NOT_CHECKED if passed is None else PASS if passed else FAIL


def entry_kind(entry: dict[str, Any]) -> str:
    """An entry's kind; ledgers from before kinds hold paper claims only as far as they say."""
    return entry.get("kind") or PAPER_CLAIM


def entry_parts(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A ledger entry's parts (its readings, settings, datasets); an entry without parts is its one part."""
    return list(entry.get("parts") or [entry])


def counts(entries: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{"paper": {...}, "parts": {...}, "diagnostics": {...}}: the paper statements, their parts (every part
    with a verdict, the ones shown but not counted included; a statement without parts is one) and our own
    checks, each with its number and the number of each verdict."""
    paper = [e for e in entries if entry_kind(e) == PAPER_CLAIM]
    groups = {"paper": paper, "parts": [p for e in paper for p in entry_parts(e)],
              "diagnostics": [e for e in entries if entry_kind(e) == DIAGNOSTIC]}
    out = {}
    for key, mine in groups.items():
        n = Counter(entry_verdict(e) for e in mine)
        out[key] = {"claims": len(mine), **{v.lower().replace(" ", "_"): n[v] for v in VERDICTS}}
    return out


def counts_line(entries: list[dict[str, Any]]) -> str:
    """"N paper statements: a PASS, b FAIL, c NOT SHOWN, d NOT CHECKED (their M parts: ...); k diagnostics"."""
    c = counts(entries)

    def verdicts(key: str) -> str:
        return ", ".join(f"{c[key][v.lower().replace(' ', '_')]} {v}" for v in VERDICTS)

    return (f"{c['paper']['claims']} paper statements: {verdicts('paper')} (their {c['parts']['claims']} "
            f"parts: {verdicts('parts')}); {c['diagnostics']['claims']} diagnostics")


def link(path: str, here: str) -> str:
    """A Markdown link to repository path `path` (``path#anchor`` allowed) from a file in directory `here`."""
    target, hash_, anchor = path.partition("#")
    rel = posixpath.relpath(target, here or ".")
    return f"[{path}]({rel}{hash_}{anchor})"


def cell(value: Any) -> str:
    """Text for a Markdown table cell: '|' escaped, one line, '—' when empty."""
    text = "—" if value in (None, "") else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def causes_table(entries: list[dict[str, Any]], here: str, shorten=lambda text: text) -> list[str]:
    """One table of the paper claims that do not pass (FAIL, NOT SHOWN): cause, explanation, evidence links."""
    rows = [e for e in entries if entry_kind(e) == PAPER_CLAIM and entry_verdict(e) in (FAIL, NOT_SHOWN)]
    if not rows:
        return ["Every checked paper claim passes."]
    lines = ["| claim | verdict | cause | explanation | evidence |", "|---|---|---|---|---|"]
    for e in rows:
        evidence = " · ".join(link(p, here) for p in e.get("evidence") or []) or "—"
        lines.append(f"| {cell(e.get('id'))} | {entry_verdict(e)} | {cell(e.get('cause'))} | "
                     f"{cell(shorten(e.get('explanation') or ''))} | {evidence} |")
    return lines


def chance_line(entries: list[dict[str, Any]]) -> str:
    """How many of the verdicts chance alone would make wrong: the parts of paper statements decided (PASS or
    FAIL) on a 95 % interval (their margin says so), each wrong with probability at most 5 % where its null
    hypothesis holds; no multiplicity correction is applied."""
    parts = [p for e in entries if entry_kind(e) == PAPER_CLAIM for p in entry_parts(e)
             if "95" in str(p.get("margin") or "")]
    decided = [p for p in parts if entry_verdict(p) in (PASS, FAIL)]
    return (f"Chance: {len(parts)} parts of the paper statements rest on a 95 % interval and {len(decided)} of "
            f"them are PASS or FAIL. Each such verdict is wrong with probability at most 5 % when its null "
            f"hypothesis holds, so chance alone could account for about {0.05 * len(decided):.1f} of them; no "
            "multiplicity correction is applied, and a verdict whose difference lies near its margin is the "
            "first to doubt.")


CAUSES_TEXT = ("Causes: *property* — of the algorithm as printed; *reading* — our reading of an ambiguous text; "
               "*data* — data or scale we do not have; *power* — inside what our runs can resolve (the "
               "explanation says what would resolve it).")


def claims_markdown(claims: list[Claim]) -> str:
    """The whole of claims.md: the counts, the causes of non-PASS paper claims, then per paper its paper
    claims and its diagnostics in separate tables."""
    entries = [c.to_dict() for c in claims]
    here = "reports"
    lines = ["# Published claims, checked", "",
             "Generated by the report stage from this commit's runs. A *paper claim* is one statement a paper "
             "makes (where: the *source* column), checked against our runs; a *diagnostic* is our own check. "
             "PASS/FAIL compares our numbers with the statement; each comparison names its test and margin, and "
             "a difference inside the margin is NOT SHOWN (neither side is supported); NOT CHECKED means a run "
             "it needs was not available. A statement checked on several datasets, settings or readings has "
             "one row (its verdict in bold, by the rule in its margin column) and its parts below it (↳), each "
             "with its own test and verdict; a part shown but not counted says so.", "",
             f"**{counts_line(entries)}**", "", chance_line(entries), "",
             "## Why paper claims do not pass", "", CAUSES_TEXT, "", *causes_table(entries, here), ""]
    for paper in dict.fromkeys(e["paper"] for e in entries):
        mine = [e for e in entries if e["paper"] == paper]
        lines += [f"## {paper}", ""]
        lines += _kind_table("Paper claims", [e for e in mine if e["kind"] == PAPER_CLAIM],
                             {"id": "id", "source": "source", "claim": "statement", "published": "published",
                              "ours": "ours", "margin": "margin"})
        lines += _kind_table("Diagnostics (our own checks)", [e for e in mine if e["kind"] == DIAGNOSTIC],
                             {"id": "id", "check": "statement", "ours": "ours", "margin": "margin"})
    return "\n".join(lines)


def _kind_table(title: str, entries: list[dict], columns: dict[str, str]) -> list[str]:
    """A section of one kind of claim: its `columns` (header -> entry field), then the verdict; none if empty.
    A statement's parts follow it, one row each: ``↳`` and the part's id, its name in the first column after
    the id, its rule on the statement's row."""
    if not entries:
        return []
    header = [*columns, "verdict"]
    fields = list(columns.values())
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for e in entries:
        row = {**e, "margin": e.get("rule") or e["margin"]}
        lines.append("| " + " | ".join(cell(row[f]) for f in fields) + f" | **{e['verdict']}** |")
        for p in e.get("parts") or []:
            part = {**p, "id": f"↳ {p['id']}", fields[1]: f"part: {p['name']}"
                    + ("" if p.get("counted", True) else " (shown, not counted)")}
            lines.append("| " + " | ".join(cell(part.get(f)) for f in fields) + f" | {p['verdict']} |")
    return [*lines, ""]


def summary_metrics(claims: list[Claim]) -> dict[str, Any]:
    """The DVC metric: paper claims and diagnostics counted apart, per verdict."""
    return counts([c.to_dict() for c in claims])
