import json
import re
from pathlib import Path

import pytest
import yaml

from ppml.data.download import UNAVAILABLE
from ppml.report.base import markdown_anchors
from ppml.report.readme import END, START, main, refresh
from ppml.report.base import short_source
from ppml.report.summary_table import statements_table
from ppml.timing import is_timing, timing_record

REPO = Path(__file__).resolve().parents[3]
WHY = f"{UNAVAILABLE}: gisette_train.data, gisette_train.labels"  # as the download stage records it
NOT_RUN = f"not run: data unavailable ({WHY})"


def _run(reports: Path, name: str, *, split: bool = True, history: list | None = None, **fields) -> None:
    """A run directory as the train stage writes it, runs/<algorithm>/<name> (the algorithm field, else the
    name's prefix): run.json (what it was) + metrics.json (numbers) + timing.json (clocks), or the older single
    metrics.json with everything in it."""
    d = reports / "runs" / str(fields.get("algorithm", name.split("-")[0])) / name
    d.mkdir(parents=True)
    strings = {k: v for k, v in fields.items() if isinstance(v, str)}
    described = {"experiment": name, "status": "ok", **strings}
    numbers = {k: v for k, v in fields.items() if not isinstance(v, str)}
    if split:
        (d / "run.json").write_text(json.dumps(described))
        (d / "metrics.json").write_text(json.dumps({k: v for k, v in numbers.items() if not is_timing(k)}))
        (d / "timing.json").write_text(json.dumps(timing_record(name, {k: v for k, v in numbers.items()
                                                                       if is_timing(k)})))
    else:
        (d / "metrics.json").write_text(json.dumps({**described, **numbers}))
    if history is not None:
        (d / "history.json").write_text(json.dumps({"runs": [{"records": seed} for seed in history]}))


@pytest.fixture
def reports(tmp_path):
    reports = tmp_path / "reports"
    (reports / "tables").mkdir(parents=True)
    (reports / "plots").mkdir()
    _run(reports, "centralized-a9a", dataset="a9a", test_error=0.14986, test_majority_error=0.23607)
    _run(reports, "local-a9a", split=False, dataset="a9a", test_error=0.16271, test_logloss=0.35)
    _run(reports, "centralized-gisette", dataset="gisette", status=NOT_RUN)
    _run(reports, "local-gisette", dataset="gisette", status=NOT_RUN)
    _run(reports, "pp_admm-adult-eps1", dataset="adult", test_error=0.25197, majority_error=0.25122)
    # FDML's headline is read at epoch 10 (the paper's Table I), the mean over seeds, not the final value
    _run(reports, "fdml_table1-a9a-lr-fdml", dataset="a9a", epochs=40.0, test_auc=0.99,
         history=[[{"epoch": 9, "test_auc": 0.1}, {"epoch": 10, "test_auc": 0.80}],
                  [{"epoch": 10, "test_auc": 0.90}, {"epoch": 11, "test_auc": 0.2}]])
    (reports / "claims.json").write_text(json.dumps([
        {"paper": "baselines", "statement": "tie", "ours": "0.39 vs 0.39", "verdict": "NOT SHOWN",
         "margin": "0.013 = 2 SE", "pass": None, "kind": "diagnostic"},
        {"paper": "baselines", "statement": "old", "ours": "x", "pass": True},  # before verdicts and kinds
        {"paper": "baselines", "statement": "gisette helps", "ours": f"centralized-gisette: {NOT_RUN}",
         "verdict": "NOT CHECKED", "margin": "", "kind": "paper", "source": "ADMM sharing paper, Fig. 3(b)"},
        {"id": "fdml-wins", "paper": "fdml", "statement": "fdml wins", "ours": "y", "verdict": "FAIL",
         "margin": "m", "kind": "paper", "source": "FDML paper, Table I", "cause": "property",
         "explanation": "The old own term slows it.", "evidence": ["reports/tables/fdml_table1.md"]},
        {"id": "fdml-ok", "paper": "fdml", "statement": "fdml ok", "ours": "y", "verdict": "PASS",
         "margin": "m", "kind": "paper", "source": "FDML paper, Fig. 2"},
        {"paper": "someone_new", "statement": "new paper's claim", "ours": "z", "verdict": "PASS",
         "margin": ""},
    ]))
    (reports / "tables" / "baselines.md").write_text(
        "# Baselines\n\nnote\n\n| run | status |\n|---|---|\n| centralized-a9a | ok |\n"
        f"| centralized-gisette | {NOT_RUN} |\n| local-gisette | {NOT_RUN} |\n")
    (reports / "tables" / "pp_admm_error.md").write_text(
        "# PP-ADMM error\n\n## adult\n\n| a |\n|---|\n| 1 |\n")
    (reports / "tables" / "fdml_table1.md").write_text("Table I analogue, no heading of its own.\n")
    (reports / "tables" / "unheard_of.md").write_text("# Something new\n\nbody\n")
    (reports / "plots" / "fdml_curves.png").write_bytes(b"\x89PNG")
    (reports / "claims.md").write_text("# Claims\n")
    return reports


@pytest.fixture
def readme(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"intro\n{START}\nstale\n{END}\noutro\n")
    return path


def _section(text: str) -> str:
    return text[text.index(START):text.index(END) + len(END)]


def _links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_readme_gets_one_row_per_paper_with_the_majority_class_beside_error_rates(reports, readme):
    refresh(readme, reports)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "stale" not in text
    rows = {line.split(" | ")[0]: line for line in _section(text).splitlines() if line.startswith("| **")}
    assert [r.split("**")[1] for r in rows] == ["Baselines", "ADMM sharing", "PP-ADMM and IPP-ADMM",
                                                "Paillier SGD and SQN", "FDML"]
    baselines = next(r for r in rows.values() if "**Baselines**" in r)
    cells = [c.strip() for c in baselines.strip("|").split(" | ")]
    assert "a9a 0.1499 / 0.1627" in cells[1] and "a9a 0.2361" in cells[2]  # error, and majority beside it
    assert cells[3] == "statements: 1 PASS, 1 NOT CHECKED; 1 diagnostic"
    assert "[full results](docs/results.md#baselines)" in cells[4]
    assert "[baselines](reports/tables/baselines.md)" in cells[4]
    pp = next(r for r in rows.values() if "**PP-ADMM" in r)
    assert "PP-ADMM 0.2520" in pp and "| Adult 0.2512 |" in pp
    fdml = next(r for r in rows.values() if "**FDML**" in r)
    assert "LR 0.8500 / — / —" in fdml  # mean of the two seeds at epoch 10, not the final 0.99
    assert ("All claims: 5 paper statements: 3 PASS, 1 FAIL, 0 NOT SHOWN, 1 NOT CHECKED (their 5 parts: 3 PASS, 1 "
            "FAIL, 0 NOT SHOWN, 1 NOT CHECKED); 1 diagnostics") in text
    # per paper, its statements in one table, from the paper claims only
    section = _section(text)
    fdml_table = section.split("**FDML**\n\n")[1].split("\n\n")[0].splitlines()
    assert fdml_table[0] == "| statement | where | the paper | ours | verdict | why |"
    assert len(fdml_table) == 4 and "| **FAIL** | property: The old own term slows it. |" in fdml_table[2]


def test_results_page_holds_every_claim_table_and_figure_under_its_paper(reports, readme, tmp_path):
    refresh(readme, reports)
    page = (tmp_path / "docs" / "results.md").read_text()
    headings = [line for line in page.splitlines() if line.startswith("#")]
    papers, diagnostics = "### Paper claims (1 PASS, 1 NOT CHECKED)", "### Diagnostics (1 NOT SHOWN)"
    assert headings.index("## Baselines") < headings.index(papers) < headings.index(diagnostics) \
        < headings.index("### Baselines") < headings.index("## ADMM sharing")
    assert headings.index("## Why paper claims do not pass") < headings.index("## Baselines")
    assert ("**5 paper statements: 3 PASS, 1 FAIL, 0 NOT SHOWN, 1 NOT CHECKED (their 5 parts: 3 PASS, 1 FAIL, 0 NOT "
            "SHOWN, 1 NOT CHECKED); 1 diagnostics**") in page
    assert ("| fdml-wins | FAIL | property | The old own term slows it. | "
            "[reports/tables/fdml_table1.md](../reports/tables/fdml_table1.md) |") in page
    assert "#### adult" in headings  # a table's own subheadings move down with it
    assert headings.index("## FDML") < headings.index("### FDML: Table I analogue")  # headless table's title
    assert headings[-3:] == ["## Other results", "### Paper claims (1 PASS)", "### Something new"]  # none dropped
    assert "| tie | 0.39 vs 0.39 | 0.013 = 2 SE | NOT SHOWN |" in page
    assert "| old | — | x | — | **PASS** |" in page
    assert "| new paper's claim | — | z | — | **PASS** |" in page.split("## Other results")[1]
    assert "![fdml_curves](../reports/plots/fdml_curves.png)" in page.split("\n## FDML\n")[1]


def test_why_a_dataset_is_missing_is_said_once_in_each_file(reports, readme, tmp_path):
    refresh(readme, reports)
    page = (tmp_path / "docs" / "results.md").read_text()
    for text, where in ((readme.read_text(), "in [docs/results.md](docs/results.md)"), (page, "below")):
        assert text.count(WHY) == 1
        assert (f"**Not run: gisette** (2 runs, data unavailable): {WHY}. Their rows and claims {where} say "
                "only \"not run: data unavailable\".") in text.splitlines()
    assert "| centralized-gisette | not run: data unavailable |" in page
    assert ("| gisette helps | ADMM sharing paper, Fig. 3(b) | centralized-gisette: not run: data unavailable | — "
            "| **NOT CHECKED** |") in page


def test_every_link_resolves_and_every_anchor_is_a_heading(reports, readme, tmp_path):
    refresh(readme, reports)
    page_path = tmp_path / "docs" / "results.md"
    anchors = markdown_anchors(page_path.read_text())
    for source in (readme, page_path):
        for link in _links(source.read_text()):
            target, _, anchor = link.partition("#")
            path = source if not target else (source.parent / target)
            assert path.exists(), f"{source.name}: {link}"
            if anchor:
                assert path == page_path and anchor in anchors, f"{source.name}: {link}"


def test_a_source_loses_only_the_papers_name_even_with_a_comma_inside_its_parentheses():
    for source, short in (("ADMM sharing paper, Sec. 5 and Fig. 3(a)", "Sec. 5 and Fig. 3(a)"),
                          ("PP-ADMM paper (Ding et al., CIKM 2020), §5 'Impacts of parameters', Fig. 1",
                           "§5 'Impacts of parameters', Fig. 1"),
                          ("Paillier SQN poster (arXiv 1912.00513), Table 1", "Table 1"),
                          ("ADMM sharing paper (arXiv version), Theorem 1 (Sec. 3.1); Fig. 1(a)/2(a)",
                           "Theorem 1 (Sec. 3.1); Fig. 1(a)/2(a)"),
                          ("Table 2 (Adult, ε = 1), §4", "Table 2 (Adult, ε = 1), §4"),  # no paper named
                          ("", "")):
        assert short_source(source) == short, source


def _where_cells(lines: list[str]) -> list[str]:
    """The "where" cells of statement tables (the second column of rows after a ``| statement |`` header)."""
    cells, inside = [], False
    for line in lines:
        if line.startswith("| statement | where |"):
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            cells.append(line.strip("|").split(" | ")[1].strip())
        elif not line.startswith("|"):
            inside = False
    return cells


def test_a_statement_table_names_where_by_the_location_not_a_fragment_of_a_citation():
    source = "PP-ADMM paper (Ding et al., CIKM 2020), §5 'Impacts of parameters', Fig. {}"
    claims = [{"id": f"pp_admm-adult-claim{i}", "paper": "pp_admm", "kind": "paper", "statement": f"s{i}",
               "source": source.format(i), "published": "p", "ours": "o", "verdict": verdict,
               "cause": "property" if verdict == "FAIL" else None,
               "explanation": "line 3's regularizer (λ̂/N 0.0545 at ε = 1)" if verdict == "FAIL" else None}
              for i, verdict in ((1, "PASS"), (2, "PASS"), (3, "FAIL"))]
    table = statements_table(claims, "pp_admm")
    assert _where_cells(table) == [f"§5 'Impacts of parameters', Fig. {i}" for i in (1, 2, 3)]
    assert "CIKM" not in "\n".join(table)
    assert table[-1].endswith("| **FAIL** | property: line 3's regularizer (λ̂/N 0.0545 at ε = 1) |")


def test_a_statement_of_parts_shows_their_verdicts_and_the_first_deciding_part():
    part = {"counted": True, "statement": "x", "published": "p", "ours": "o", "margin": "m"}
    claim = {"id": "fdml-s", "paper": "fdml", "kind": "paper", "statement": "s", "source": "FDML paper, §VII",
             "published": "p", "ours": "o", "verdict": "FAIL", "cause": "data", "explanation": "e",
             "parts": [{**part, "id": "a", "name": "a9a", "verdict": "PASS"},
                       {**part, "id": "b", "name": "synth", "verdict": "FAIL", "explanation": "too slow"},
                       {**part, "id": "c", "name": "literal", "verdict": "FAIL", "counted": False,
                        "explanation": "x"}]}
    row = statements_table([claim], "fdml")[-1]
    assert "| parts: 1 PASS, 1 FAIL; shown, not counted: 1 FAIL | **FAIL** | data: synth: too slow |" in row


def test_no_row_of_the_committed_summary_starts_with_a_fragment():
    """The committed README: every statement's "where" starts at a word or a section mark, never inside a
    citation (e.g. "CIKM 2020), §5"), and opens as many parentheses as it closes."""
    cells = _where_cells(_section((REPO / "README.md").read_text()).splitlines())
    assert cells, "the README's summary has no statement table"
    for cell in cells:
        assert not re.match(r"[^\w§'\"(]|\S*\d{4}\)", cell), cell[:80]
        assert cell.count("(") == cell.count(")"), cell[:80]


def test_runs_a_headline_needs_are_reported_missing_and_shown_as_a_dash(reports, readme):
    missing = refresh(readme, reports)
    assert {"local-adult", "paillier_sqn-default_credit-b1000", "fdml_table1-a9a-nn-local"} <= missing
    assert "centralized-a9a" not in missing


def test_runs_are_read_from_their_algorithms_folders_and_a_run_in_two_is_refused(reports, readme, capsys):
    """runs/<algorithm>/<name>: a run directory left flat (runs/<name>) is not read; one run in two algorithms'
    folders (a stale copy) is an error naming both."""
    from ppml.report.readme import Reports

    read = Reports(reports)
    assert read.dirs["centralized-a9a"] == reports / "runs" / "centralized" / "centralized-a9a"
    assert read.at_epoch("fdml_table1-a9a-lr-fdml", "test_auc", 10) == pytest.approx(0.85)
    (reports / "runs" / "flat-run").mkdir()
    (reports / "runs" / "flat-run" / "metrics.json").write_text(json.dumps({"experiment": "flat-run"}))
    assert "flat-run" not in Reports(reports).runs
    _run(reports, "local-a9a", algorithm="fdml")
    with pytest.raises(ValueError, match="run 'local-a9a' has two directories: .*fdml/local-a9a and "
                                         ".*local/local-a9a"):
        Reports(reports)
    assert main([str(readme), str(reports)]) == 2 and "two directories" in capsys.readouterr().err


def test_a_readme_without_its_markers_is_refused_and_nothing_is_written(reports, tmp_path, capsys):
    bad = tmp_path / "README.md"
    bad.write_text("no markers\n")
    with pytest.raises(ValueError, match="results:start"):
        refresh(bad, reports)
    assert bad.read_text() == "no markers\n" and not (tmp_path / "docs").exists()
    assert main([str(bad), str(reports)]) == 2 and "results:start" in capsys.readouterr().err
    assert main([str(bad)]) == 2


# --- the repository's own README --------------------------------------------------------------------------

def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


def _committed_block(section: str, name: str) -> str:
    """The lines of the `section`.`name` block of its params file (params/<algorithm>.yaml), as committed."""
    lines = (REPO / "params" / f"{section.removesuffix('_experiments')}.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(rf"{section}:(\s+#.*)?", line))
    first = lines.index(f"  {name}:", start)
    end = next((i for i in range(first + 1, len(lines)) if lines[i] and not lines[i].startswith("    ")),
               len(lines))
    return "\n".join(lines[first + 1:end])


def test_the_ray_example_is_a_committed_block_plus_transport_ray():
    readme = (REPO / "README.md").read_text() + (REPO / "docs" / "ray.md").read_text()
    examples = [b for b in _yaml_blocks(readme) if "transport: ray" in b]
    assert examples
    for block in examples:
        (section, experiments), = yaml.safe_load(block).items()
        (name, _), = experiments.items()
        assert name.endswith("-ray")
        body = "\n".join(line for line in block.splitlines()[2:] if line != "    transport: ray")
        assert body == _committed_block(section, name.removesuffix("-ray"))
    from ppml.config import load_params

    params = load_params(REPO / "params.yaml")
    for copied in re.findall(r"a copy of `([\w.-]+)`", readme):  # blocks named, not shown, exist too
        assert any(copied in (params.get(s) or {}) for s in params if s.endswith("_experiments")), copied


def test_the_readme_is_short_and_shows_no_result_it_does_not_generate():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 260
    hand_written = re.sub(r"```.*?```", "", text.replace(_section(text), ""), flags=re.S)
    hand_written = hand_written.split("## Run times")[0] + hand_written.split("## Comparing commits")[1]
    # results have several decimals; the measured run times are the one hand-written exception
    assert not re.findall(r"(?<!arXiv )\b\d+\.\d{3,}\b", hand_written)
    for doc in ("docs/methods.md", "docs/results.md"):
        assert f"]({doc}" in text and (REPO / doc).exists()


def test_training_times_are_summed_from_the_runs_own_clocks(tmp_path):
    from ppml.report.readme import Reports, training_times

    reports = tmp_path / "reports"
    _run(reports, "centralized-a", algorithm="centralized", seconds=30.0)
    _run(reports, "local-a", split=False, algorithm="local", seconds=30.0, seeds=2)  # before timing.json
    _run(reports, "fdml-a", algorithm="fdml", seconds=120.0, seeds=3)
    _run(reports, "paillier_sgd-a", algorithm="paillier_sgd", seconds=600.0, encrypted=True)
    _run(reports, "paillier_sqn-a-plain", algorithm="paillier_sqn", seconds=60.0, encrypted=False)
    _run(reports, "gone", algorithm="fdml", status=NOT_RUN)  # no clock: left out
    read = Reports(reports)
    assert read.timing["local-a"] == {"seconds": 30.0} and read.timing["centralized-a"] == {"seconds": 30.0}
    assert "seconds" not in read.runs["local-a"] and "seconds" not in read.runs["centralized-a"]
    assert training_times(Reports(reports)) == [("baselines", 1.5), ("FDML", 6.0), ("Paillier, plaintext", 1.0),
                                                ("Paillier, encrypted", 10.0)]


def test_the_summary_says_how_long_training_took(reports, readme):
    _run(reports, "admm_sharing-x", algorithm="admm_sharing", seconds=90.0)
    refresh(readme, reports)
    assert "Training time of these results (each run's own clock, summed over its seeds and runs): " \
           "ADMM sharing 1.5 min." in _section(readme.read_text())
