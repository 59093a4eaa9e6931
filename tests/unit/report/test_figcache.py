"""The report draws a figure again only when what it shows changed (ppml.report.figcache)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ppml.report import figcache  # noqa: E402
from ppml.report.base import ReportOutput  # noqa: E402


def _figure(y=(1.0, 2.0, 3.0), *, title="loss", color="C0", ticks=None, label="run"):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3], list(y), color=color, label=label)
    ax.bar([1, 2], [0.5, 0.7])
    ax.fill_between([1, 2, 3], [0, 0, 0], list(y), alpha=0.2)
    ax.set_title(title)
    ax.set_yscale("log")
    if ticks is not None:
        ax.set_xticks(ticks)
    ax.legend()
    return fig


@pytest.mark.parametrize("change", [{"y": (1.0, 2.0, 3.5)}, {"title": "logloss"}, {"color": "C1"},
                                    {"ticks": [1, 3]}, {"label": "other run"}])
def test_the_key_follows_what_the_figure_shows(change):
    same, again, changed = _figure(), _figure(), _figure(**change)
    assert figcache.key(same) == figcache.key(again)
    assert figcache.key(changed) != figcache.key(same)
    plt.close("all")


def test_an_unchanged_figure_keeps_its_png_bytes_and_a_changed_one_is_drawn(tmp_path, monkeypatch):
    root = tmp_path / "reports"
    first = ReportOutput(root).figure("f", _figure())
    assert figcache.stored_key(first) is not None
    before = first.read_bytes()

    def refuse(*args, **kwargs):
        raise AssertionError("drawn again")

    with monkeypatch.context() as patch:  # the same figure, staged: copied from the last report's PNG
        patch.setattr(Figure, "savefig", refuse)
        staged = ReportOutput(root, dest=tmp_path / "staging").figure("f", _figure())
    assert staged.read_bytes() == before
    changed = ReportOutput(root, dest=tmp_path / "staging2").figure("f", _figure(y=(1.0, 2.0, 4.0)))
    assert changed.read_bytes() != before and figcache.stored_key(changed) != figcache.stored_key(first)


def test_a_png_without_a_key_is_drawn_again(tmp_path):
    root = tmp_path / "reports"
    (root / "plots").mkdir(parents=True)
    fig = _figure()
    fig.savefig(root / "plots" / "f.png", format="png")  # a PNG from elsewhere: no key
    assert figcache.stored_key(root / "plots" / "f.png") is None
    assert figcache.stored_key(root / "plots" / "absent.png") is None
    out = ReportOutput(root, dest=tmp_path / "staging").figure("f", _figure())
    assert figcache.stored_key(out) is not None and out.read_bytes() != b""
    plt.close("all")
