import json

from ppml.report.readme import END, START, refresh


def test_readme_claims_show_the_verdict_and_margin_in_both_formats(tmp_path):
    reports = tmp_path / "reports"
    (reports / "tables").mkdir(parents=True)
    (reports / "claims.json").write_text(json.dumps([
        {"statement": "tie", "ours": "0.39 vs 0.39", "verdict": "NOT SHOWN", "margin": "0.013 = 2 SE",
         "pass": None},
        {"statement": "old", "ours": "x", "pass": True},
    ]))
    (reports / "tables" / "baselines.md").write_text("# Baselines\n\n| a |\n|---|\n| 1 |\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{START}\nstale\n{END}\noutro\n")
    refresh(readme, reports)
    text = readme.read_text()
    assert "| tie | 0.39 vs 0.39 | 0.013 = 2 SE | NOT SHOWN |" in text
    assert "| old | x | — | PASS |" in text
    assert "### Baselines" in text and "stale" not in text and text.endswith("outro\n")
