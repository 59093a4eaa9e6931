"""Write the page `dvc plots show` / `dvc plots diff` fill in, with its chart library inside: no network needed.

    python tools/plots_template.py          # rewrite .dvc/plots_page.html from the installed vl-convert-python
    python tools/plots_template.py --check  # exit 1 when the committed page differs from what it would write

DVC's own page loads Vega, Vega-Lite and Vega-Embed from a CDN, so offline it stays blank. This page inlines the
one JavaScript bundle of those three that vl-convert-python (pinned in pyproject.toml) ships for Vega-Lite
:data:`VEGA_LITE` (the major version of the specs DVC writes), and leaves out DVC's ``{scripts}`` placeholder (the
CDN tags); .dvc/config names it (``plots.html_template``), so `dvc plots show` uses it online and offline alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / ".dvc" / "plots_page.html"
VEGA_LITE = "5.21"  # dvc-render's specs are Vega-Lite 5; the newest 5.x the package bundles


def page() -> str:
    import vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=VEGA_LITE)
    if "</script" in bundle.lower():  # would end the inline script early
        raise SystemExit("plots_template: the bundle contains '</script'; it cannot be inlined as is")
    return "\n".join([
        "<!DOCTYPE html>",
        "<html>",
        "<head>",
        '<meta charset="utf-8">',
        "{refresh_tag}",
        "<title>ppml: DVC plots</title>",
        f"<!-- Vega {vl_convert.get_vega_version()}, Vega-Lite {VEGA_LITE}, Vega-Embed "
        f"{vl_convert.get_vega_embed_version()}: vl-convert-python's bundle, inlined by tools/plots_template.py -->",
        "<script>",
        bundle,
        "</script>",
        "<style>table { border-spacing: 15px; } body { font-family: sans-serif; }</style>",
        "</head>",
        "<body>",
        "{plot_divs}",
        "</body>",
        "</html>",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed page instead")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        same = PAGE.is_file() and PAGE.read_text(encoding="utf-8") == text
        if not same:
            print(f"{PAGE.relative_to(ROOT)} is not what tools/plots_template.py writes: run it", file=sys.stderr)
        return 0 if same else 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
