"""A figure's content key, so the report re-uses a PNG whose figure did not change instead of drawing it again.

Drawing the report's figures is most of its run time, and a one-run edit changes one or two of them. Each PNG
the report writes carries, in a text chunk, the key of the figure it shows: the sha256 of the code that built
it (every loaded ``ppml`` module's source, and matplotlib's version) and of everything the figure's artists
hold before drawing: each line's points and style, each collection's paths and offsets, each patch's
path and placement, each text, each axes' limits, scales, tick rules and placement. With the code fixed, a figure
is a function of those, so an equal key means the same drawing, and the previous PNG's bytes are copied
unchanged (:meth:`ppml.report.base.ReportOutput.figure`).
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

#: the PNG text chunk that holds the key
CHUNK = "ppml-figure-key"


@functools.cache
def _code() -> str:
    import matplotlib

    digest = hashlib.sha256(f"matplotlib {matplotlib.__version__}".encode())
    for name in sorted(n for n in sys.modules if n == "ppml" or n.startswith("ppml.")):
        path = getattr(sys.modules[name], "__file__", None)
        if path:
            digest.update(name.encode())
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _bytes(value: Any) -> bytes:
    if isinstance(value, np.ndarray) or (isinstance(value, (list, tuple)) and value and
                                         isinstance(value[0], np.ndarray)):
        arrays = value if isinstance(value, (list, tuple)) else [value]
        return b"|".join(np.ascontiguousarray(np.asarray(a, dtype=float)).tobytes() for a in arrays)
    return repr(value).encode()


def _facts(artist: Any) -> list[Any]:
    """What an artist draws, by its kind; the common properties first."""
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    out: list[Any] = [type(artist).__name__, artist.get_visible(), artist.get_zorder(), artist.get_alpha(),
                      artist.get_label()]
    if isinstance(artist, Line2D):
        out += [artist.get_xydata(), artist.get_color(), artist.get_linestyle(), artist.get_linewidth(),
                artist.get_marker(), artist.get_markersize(), artist.get_markerfacecolor()]
    elif isinstance(artist, Text):
        out += [artist.get_text(), artist.get_position(), artist.get_color(), artist.get_fontsize(),
                artist.get_rotation(), artist.get_ha(), artist.get_va(), artist.get_fontweight()]
    elif isinstance(artist, Patch):
        out += [artist.get_path().vertices, artist.get_patch_transform().get_matrix(), artist.get_facecolor(),
                artist.get_edgecolor(), artist.get_linewidth(), artist.get_linestyle(), artist.get_hatch()]
    elif isinstance(artist, Collection):
        out += [[p.vertices for p in artist.get_paths()], np.asarray(artist.get_offsets()),
                np.asarray(artist.get_facecolor()), np.asarray(artist.get_edgecolor()),
                np.asarray(artist.get_linewidths()), np.asarray(artist.get_sizes() if hasattr(artist, "get_sizes")
                                                                else [])]
    elif isinstance(artist, AxesImage):
        out += [np.asarray(artist.get_array()), artist.get_extent()]
    return out


def _axis(axis: Any) -> list[Any]:
    """An axis's label, scale and tick rules (a fixed locator's places and a fixed formatter's labels: the
    ticks themselves are made at drawing time from these and the limits)."""
    locator, formatter = axis.get_major_locator(), axis.get_major_formatter()
    return [axis.label.get_text(), axis.get_scale(), type(locator).__name__, np.asarray(getattr(locator, "locs", [])),
            type(formatter).__name__, list(getattr(formatter, "seq", []) or []), axis.get_visible()]


def _walk(artist: Any) -> list[Any]:
    """Artists to fingerprint under `artist`: an axes' own children (its axes by their rules, not their ticks),
    a legend's and a figure's everything."""
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis

    out: list[Any] = []
    for child in artist.get_children():
        if isinstance(child, Axes):
            out += [["axes", child.get_position().bounds, child.get_xlim(), child.get_ylim()], *_walk(child)]
        elif isinstance(child, Axis):
            out.append(_axis(child))
        else:
            out += [_facts(child), *_walk(child)]
    return out


def key(fig: Any) -> str:
    """The content key of matplotlib figure `fig` (see the module docstring)."""
    digest = hashlib.sha256(_code().encode())
    digest.update(_bytes([np.asarray(fig.get_size_inches()), np.asarray([fig.dpi])]))
    for facts in _walk(fig):
        for fact in facts:
            digest.update(_bytes(fact))
            digest.update(b";")
    return digest.hexdigest()


def stored_key(png: Path) -> str | None:
    """The key a PNG written by the report carries, or None (no such file, another PNG, unreadable)."""
    from PIL import Image

    try:
        with Image.open(png) as image:
            return image.text.get(CHUNK)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        return None
