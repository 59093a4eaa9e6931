"""The page `dvc plots show` fills in carries its chart library: it loads nothing from the network.

.dvc/plots_page.html inlines vl-convert-python's bundle of Vega, Vega-Lite and Vega-Embed (tools/plots_template.py)
and .dvc/config names it, so the figures render offline. A new release of the package changes the bundle: the
page must then be written again, which the first test asks for.
"""

from __future__ import annotations

import configparser
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / ".dvc" / "plots_page.html"


def _tool():
    spec = importlib.util.spec_from_file_location("plots_template", ROOT / "tools" / "plots_template.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_tool_writes_from_the_pinned_package():
    assert PAGE.read_text(encoding="utf-8") == _tool().page(), "run `python tools/plots_template.py`"


def test_the_page_references_no_remote_resource():
    text = PAGE.read_text(encoding="utf-8")
    # what a browser would fetch: script, link, image or frame sources, CSS urls and imports, module imports
    fetched = re.findall(r"""(?:\b(?:src|href)\s*=\s*["']?|url\(\s*["']?|@import\s+["']?|\bimport\s*\(\s*["'])"""
                         r"""(?:https?:)?//""", text, flags=re.IGNORECASE)
    assert not fetched, fetched[:5]
    assert "<script src" not in text.lower() and "<link" not in text.lower()
    # the one script is inline, and it defines what dvc's plot divs call
    assert text.count("<script>") == 1 and "window.vegaEmbed=" in text


def test_dvc_config_names_the_page_and_the_page_drops_dvcs_cdn_scripts():
    config = configparser.ConfigParser()
    config.read(ROOT / ".dvc" / "config")
    assert config["plots"]["html_template"] == PAGE.name
    text = PAGE.read_text(encoding="utf-8")
    assert "{plot_divs}" in text and "{scripts}" not in text


def test_the_check_fails_on_a_page_that_drifted(tmp_path, monkeypatch):
    tool = _tool()
    drifted = tmp_path / "page.html"
    drifted.write_text("<html>{plot_divs}</html>")
    monkeypatch.setattr(tool, "PAGE", drifted)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0 and tool.main(["--check"]) == 0


def test_the_templates_and_the_png_figures_share_one_palette():
    import json

    from ppml.report.base import PALETTE

    for template in sorted((ROOT / ".dvc" / "plots").glob("*.json")):
        spec = json.loads(template.read_text().replace('"<DVC_METRIC_DATA>"', "[]"))
        color = spec.get("encoding", {}).get("color") or spec.get("spec", {}).get("encoding", {}).get("color")
        if color and color.get("field") == "series":
            assert tuple(color["scale"]["range"]) == PALETTE, template.name


def test_every_png_legend_is_beside_its_axes(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ppml.report.base import ReportOutput, use_palette

    use_palette()
    out = ReportOutput(tmp_path)
    fig, ax = plt.subplots()
    line, = ax.plot([0, 1], [0, 1], label="a")
    ax.legend(fontsize=7)
    assert line.get_color() == "#4c78a8"
    legend_axes = ax.get_legend()
    out.figure("f", fig)
    moved = ax.get_legend()
    assert moved is not legend_axes and moved.get_bbox_to_anchor().x0 >= ax.bbox.x1 - 1
    assert moved.get_texts()[0].get_fontsize() == 7
    assert (tmp_path / "plots" / "f.png").stat().st_size > 0
