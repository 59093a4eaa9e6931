"""Every name a module of the package exports in ``__all__`` exists in it, so that ``from ppml.x import *``
and the documentation's references never meet a name that was renamed or removed."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ppml

MODULES = sorted(m.name for m in pkgutil.walk_packages(ppml.__path__, prefix="ppml.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_every_exported_name_exists(name):
    module = importlib.import_module(name)
    missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
