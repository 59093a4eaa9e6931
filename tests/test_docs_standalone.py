"""The documentation stands alone: everything it points a reader at is inside the repository.

The specifications the code follows are copied into ``docs/specs/``; the papers are cited by title, authors,
venue and year; the data mirror is whatever directory ``DATA_MIRROR`` names. No page may send a reader to a
sibling directory of the checkout (``../shared/...``), which someone cloning the project does not have.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A reference out of the checkout: to a sibling directory, or to the specs, papers or datasets of a
#: shared tree beside it.
OUTSIDE = re.compile(r"\.\./shared\b|\bshared/(?:specs|papers|datasets)\b")
SPEC = re.compile(r"\bdocs/specs/([\w.-]+\.md)\b")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _code() -> list[Path]:
    return [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "stages").rglob("*.py"))]


def _outside_references(paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
            for path in paths for number, line in enumerate(path.read_text().splitlines(), 1)
            if OUTSIDE.search(line)]


def test_outside_reference_pattern():
    for line in ("see ../shared/specs/dvp.md", "(`shared/specs/fdml_paper.md`)",
                 "DATA_MIRROR=../shared/datasets", "../shared/papers/fdml.txt"):
        assert OUTSIDE.search(line), line
    for line in ("each party's shared values", "a shared Ray cluster", "docs/specs/dvp.md"):
        assert not OUTSIDE.search(line), line


def test_readme_and_docs_point_only_inside_the_repository():
    found = _outside_references(_docs())
    assert not found, "a reader of a clone cannot follow these:\n" + "\n".join(found[:20])


def test_code_comments_point_only_inside_the_repository():
    found = _outside_references(_code())
    assert not found, "point these at docs/specs/ (or cite the paper):\n" + "\n".join(found[:20])


def test_every_spec_cited_exists_and_every_spec_is_described():
    specs = ROOT / "docs" / "specs"
    cited = {(path.relative_to(ROOT), name) for path in [*_docs(), *_code()]
             for name in SPEC.findall(path.read_text())}
    missing = sorted(f"{path}: docs/specs/{name}" for path, name in cited if not (specs / name).is_file())
    assert not missing, "cited but not in docs/specs/: " + "; ".join(missing)
    assert cited, "nothing cites docs/specs/ (the pattern no longer matches the references)"
    index = (specs / "README.md").read_text()
    undescribed = sorted(p.name for p in specs.glob("*.md")
                         if p.name != "README.md" and f"]({p.name})" not in index)
    assert not undescribed, f"docs/specs/README.md does not describe {undescribed}"


def test_links_of_the_specs_index_resolve():
    index = ROOT / "docs" / "specs" / "README.md"
    targets = [t for t in LINK.findall(index.read_text()) if "://" not in t]
    assert targets
    broken = [t for t in targets if not (index.parent / t).exists()]
    assert not broken, f"docs/specs/README.md links to missing files: {broken}"
