"""Every link of the documentation and of the generated reports leads somewhere.

Each relative Markdown link ``[text](target)`` or image ``![alt](target)``, each ``<a href="target">`` and
each reference definition ``[label]: target`` of README.md, docs/**/*.md and reports/**/*.md names a file or
directory of the checkout (not one git ignores), and its ``#anchor`` names a heading of the target by GitHub's
anchor rules or an explicit ``<a id=...>`` / ``<a name=...>`` (:func:`ppml.report.base.markdown_anchors`).
The evidence paths of reports/claims.json (repository paths, ``path#anchor`` allowed) are held to the same
rules. Links with a scheme (``https:``, ``mailto:``) are not followed: the tests use no network.

Generated files (reports/claims.md, reports/tables/, docs/results.md, the README's results section) are
fixed at their generator (src/ppml/report/), never by hand: the report stage and ``make docs`` rewrite them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from ppml.report.base import heading_anchor, markdown_anchors, markdown_lines

ROOT = Path(__file__).resolve().parents[1]

#: an inline link or image: [text](target "title"); the text may hold one level of brackets, the target one
#: level of parentheses, or be written <in angle brackets>
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
                    r"\(\s*(<[^>]*>|(?:[^()\s]|\([^()\s]*\))+)(?:\s+\"[^\"]*\")?\s*\)")
HREF = re.compile(r"""<a\s[^>]*?\bhref\s*=\s*["']([^"']+)["']""", re.I)
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?")
CODE_SPAN = re.compile(r"(`+).+?\1")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
#: GitHub's line anchors of a non-Markdown file: #L10, #L10-L20
LINE_ANCHOR = re.compile(r"L\d+(?:-L\d+)?")

#: Links known to be broken in files this change may not edit, each with why; the test fails once one is
#: mended (or gone), so that its entry is removed with it.
KNOWN_BROKEN: dict[tuple[str, str], str] = {}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "reports").rglob("*.md"))]


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link of Markdown `text`, outside code blocks and code spans."""
    found = []
    for number, line in markdown_lines(text):
        line = CODE_SPAN.sub("", line)
        definition = DEFINITION.match(line)
        targets = [definition[1]] if definition else []
        targets += [t.strip("<>") for t in INLINE.findall(line)] + HREF.findall(line)
        found += [(number, target) for target in targets]
    return found


def broken(target: str, source: Path, *, base: Path | None = None) -> str | None:
    """Why `target`, linked from the file `source` (relative to `base`, default the file's directory), does
    not resolve; None when it does or is not ours to follow (a scheme)."""
    if SCHEME.match(target):
        return None
    path, _, anchor = target.partition("#")
    path, anchor = unquote(path), unquote(anchor)
    start = ROOT if path.startswith("/") else (source.parent if base is None else base)
    resolved = (start / path.lstrip("/")).resolve() if path else source
    if not resolved.is_relative_to(ROOT):
        return f"outside the repository ({resolved})"
    if not resolved.exists():
        return "no such file"
    if not anchor:
        return None
    if resolved.suffix == ".md" and resolved.is_file():
        return None if anchor in markdown_anchors(resolved.read_text()) else f"no heading or <a id> #{anchor}"
    if resolved.is_file() and LINE_ANCHOR.fullmatch(anchor):
        return None
    return f"#{anchor} on a file that is not Markdown"


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _all_links() -> list[tuple[Path, int, str]]:
    return [(doc, number, target) for doc in documents() for number, target in links(doc.read_text())]


def test_github_anchor_rules():
    for heading, anchor in (("What each experiment does, and where we chose",
                             "what-each-experiment-does-and-where-we-chose"),
                            ("A process per party: `transport: ray` and `transport: grpc`",
                             "a-process-per-party-transport-ray-and-transport-grpc"),
                            ("PP-ADMM and IPP-ADMM", "pp-admm-and-ipp-admm"),
                            ("Paper claims (16 PASS, 2 FAIL)", "paper-claims-16-pass-2-fail"),
                            ("admm_sharing", "admm_sharing"), ("PP-ADMM: the ε split", "pp-admm-the-ε-split"),
                            ("**Bold** and _emphasis_ and [a link](x.md)", "bold-and-emphasis-and-a-link"),
                            ("FDML: Table I analogue", "fdml-table-i-analogue")):
        assert heading_anchor(heading) == anchor, heading
    text = ("# Title\n\n## Twice\n\ntext <a id=\"mark\"></a>\n\n## Twice\n\n### Twice #\n\n"
            "```\n## Not a heading\n```\n\n<a name='old'>x</a>\n")
    assert markdown_anchors(text) == {"title", "twice", "twice-1", "twice-2", "mark", "old"}


def test_the_link_pattern():
    text = ("See [a](a.md#x), ![fig](../plots/f.png) and [b (c)](runs/b(1)) | [x \\| y](t.md) |\n"
            "`[not](code.md)` and [ext](https://example.org/a_(b)) <a href=\"h.md#y\">h</a>\n"
            "```\n[fenced](no.md)\n```\n[ref]: defined.md\n")
    assert [t for _, t in links(text)] == ["a.md#x", "../plots/f.png", "runs/b(1)", "t.md",
                                           "https://example.org/a_(b)", "h.md#y", "defined.md"]


def test_the_documents_have_links_to_check():
    found = _all_links()
    assert len(found) > 100, f"only {len(found)} links found: the pattern no longer matches the documents"
    assert any("#" in target for _, _, target in found)


def test_every_link_and_anchor_resolves():
    bad, known = [], set()
    for doc, number, target in _all_links():
        why = broken(target, doc)
        if why is None:
            continue
        if (_rel(doc), target) in KNOWN_BROKEN:
            known.add((_rel(doc), target))
            continue
        bad.append(f"{_rel(doc)}:{number}: ({target}) {why}")
    assert not bad, ("broken links (mend generated files in src/ppml/report/, then re-run the report):\n"
                     + "\n".join(bad))
    mended = sorted(set(KNOWN_BROKEN) - known)
    assert not mended, f"these links resolve now (or are gone): remove them from KNOWN_BROKEN: {mended}"


def test_every_evidence_path_of_the_claims_resolves():
    claims = json.loads((ROOT / "reports" / "claims.json").read_text())
    evidence = [(c["id"], path) for c in claims for path in c.get("evidence") or []]
    assert evidence, "reports/claims.json cites no evidence"
    bad = [f"{cid}: {path}: {why}" for cid, path in evidence
           if (why := broken(path, ROOT / "reports" / "claims.json", base=ROOT))]
    assert not bad, "evidence that does not resolve:\n" + "\n".join(bad)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_link_leads_to_a_file_git_ignores():
    """A reader of a clone has no ignored file: a link to one is broken there even when it works here."""
    targets = set()
    for doc, _, target in _all_links():
        path = unquote(target.partition("#")[0])
        if path and not SCHEME.match(target):
            resolved = ((ROOT if path.startswith("/") else doc.parent) / path.lstrip("/")).resolve()
            if resolved.is_relative_to(ROOT) and resolved.exists():
                targets.add(_rel(resolved))
    result = subprocess.run(["git", "check-ignore", "--stdin"], input="\n".join(sorted(targets)), text=True,
                            capture_output=True, cwd=ROOT, check=False)
    assert result.returncode in (0, 1), result.stderr
    assert not result.stdout.strip(), "links to files git ignores:\n" + result.stdout
