"""One ledger row per statement a paper makes: the checks of its readings, settings and datasets as its parts.

A paper report module checks each reading of a statement as a claim of its own (the same sentence on a9a and
on Credit 1, under Algorithm 1 as printed and under model (8), at two values of ρ, ...): that is what its
tests look at. The ledger, though, counts statements. A module lists its statements in ``STATEMENTS``
(:class:`Statement`: the new row's id and text, and which claims are its parts); :func:`group` replaces those
claims by the one row, whose verdict is :func:`ppml.report.base.combine` of the counted parts (the rule
:data:`ppml.report.base.RULE`, on the row). A part may be shown but not counted (``shown``): a second reading
the row keeps beside it with the reason (``why_shown``), its verdict visible but not deciding. A claim no
statement names stays a row of its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ppml.report.base import FAIL, NOT_SHOWN, PAPER_CLAIM, RULE, Claim, Part, combine, short_source


@dataclass(frozen=True)
class Statement:
    """A statement's row: `id`, the `statement` in our words, and its parts as (claim id, part name) pairs;
    `shown` names the part ids that are shown but not counted, `why_shown` says why. `source` and `published`
    default to the parts' own (joined when they differ)."""

    id: str
    statement: str
    parts: tuple[tuple[str, str], ...]
    shown: tuple[str, ...] = ()
    why_shown: str = ""
    source: str = ""
    published: str = ""

    def __post_init__(self) -> None:
        ids = [i for i, _ in self.parts]
        if len(set(ids)) != len(ids):
            raise ValueError(f"statement {self.id}: a part is named twice in {ids}")
        unknown = sorted(set(self.shown) - set(ids))
        if unknown:
            raise ValueError(f"statement {self.id}: shown {unknown} are not among its parts")
        if self.shown and not self.why_shown.strip():
            raise ValueError(f"statement {self.id}: why_shown must say why {list(self.shown)} do not count")


def _joined(values: list[str], names: list[str]) -> str:
    """One text when the parts agree; their distinct texts when several parts share one (a published number
    that every dataset of ours is read against); else each part's own, named."""
    unique = list(dict.fromkeys(v for v in values if v))
    if len(unique) <= 1:
        return unique[0] if unique else ""
    if len(unique) < len([v for v in values if v]):
        return "; ".join(unique)
    return "; ".join(f"{name}: {value}" for name, value in zip(names, values) if value)


def _sources(sources: list[str]) -> str:
    """The parts' distinct sources in order, the paper's name said once (in front of the first)."""
    unique = list(dict.fromkeys(sources))
    return "; ".join([unique[0], *(short_source(x) for x in unique[1:])])


def _row(spec: Statement, paper: str, found: list[tuple[Claim, str]]) -> Claim:
    shown = set(spec.shown)
    parts = tuple(Part(id=c.id, name=name, statement=c.statement, published=c.published, ours=c.ours,
                       verdict=c.verdict, margin=c.margin, counted=c.id not in shown, cause=c.cause,
                       explanation=c.explanation, evidence=c.evidence) for c, name in found)
    counted = [p for p in parts if p.counted]
    verdict = combine(p.verdict for p in counted)
    rule = RULE + (f"; shown, not counted: {', '.join(p.name for p in parts if not p.counted)} "
                   f"({spec.why_shown})" if len(counted) < len(parts) else "")
    extra = {}
    if verdict in (FAIL, NOT_SHOWN):
        deciding = [p for p in counted if p.verdict == verdict]
        extra = {"cause": Counter(p.cause for p in deciding).most_common(1)[0][0],
                 "explanation": "; ".join(f"{p.name}: {p.explanation}".rstrip(".") for p in deciding) + ".",
                 "evidence": tuple(dict.fromkeys(e for p in deciding for e in p.evidence))}
    names = [p.name for p in parts]
    ours = " · ".join(f"{p.name}: {p.verdict}" + ("" if p.counted else " (not counted)") for p in parts)
    return Claim(id=spec.id, paper=paper, statement=spec.statement,
                 published=spec.published or _joined([p.published for p in parts], names),
                 ours=ours, verdict=verdict, margin="by its parts (below)", kind=PAPER_CLAIM,
                 source=spec.source or _sources([c.source for c, _ in found]), parts=parts, rule=rule,
                 **extra)


def group(claims: list[Claim], statements: list[Statement]) -> list[Claim]:
    """`claims` with each statement's parts replaced by its one row, at the place of its first part.

    A part absent from `claims` (its runs not configured) is left out; a statement none of whose parts is
    present has no row. A part must be a paper claim and belong to one statement only.
    """
    by_id = {c.id: c for c in claims}
    owner: dict[str, Statement] = {}
    for spec in statements:
        if spec.id in by_id:
            raise ValueError(f"statement {spec.id}: a claim already has this id")
        for cid, _ in spec.parts:
            if cid in owner:
                raise ValueError(f"claim {cid} is a part of both {owner[cid].id} and {spec.id}")
            owner[cid] = spec
            if cid in by_id and by_id[cid].kind != PAPER_CLAIM:
                raise ValueError(f"statement {spec.id}: part {cid} is a {by_id[cid].kind}, not a paper claim")
    out: list[Claim] = []
    for claim in claims:
        spec = owner.get(claim.id)
        if spec is None:
            out.append(claim)
        elif claim.id == next(cid for cid, _ in spec.parts if cid in by_id):
            found = [(by_id[cid], name) for cid, name in spec.parts if cid in by_id]
            papers = {c.paper for c, _ in found}
            if len(papers) != 1:
                raise ValueError(f"statement {spec.id}: parts of several papers {sorted(papers)}")
            out.append(_row(spec, papers.pop(), found))
    return out
