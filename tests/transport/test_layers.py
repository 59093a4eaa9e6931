"""The network layer imports nothing above it, and the links know their carriers only by registration.

Read from the source (every import statement of src/ppml/network/*.py, function-level ones included), so a
lazily imported module counts as much as one imported at the top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from ppml.network import grpc_links, links, tls_links
from ppml.network.endpoint import CARRIERS
from ppml.network.peer import PeerNetwork
from ppml.network.tls import throwaway_set

SRC = Path(__file__).resolve().parents[2] / "src"
NETWORK = SRC / "ppml" / "network"

#: the ppml modules outside ppml.network that a network module may import: low-level ones with nothing of
#: what runs over the links (ppml.config: ParamError, for a bad peers file)
ALLOWED = {"ppml.config"}

CARRIER_MODULES = {"ppml.network.tls_links", "ppml.network.grpc_links"}


def _is_module(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imported(path: Path) -> set[str]:
    """Every ppml module `path` imports anywhere in its body: ``import a.b`` gives ``a.b``; ``from a import b``
    gives ``a.b`` when that is a module, else ``a`` (relative imports resolved against ppml.network);
    ``importlib.import_module("a.b")`` with a constant name gives ``a.b``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = ["ppml", "network"][: 3 - node.level]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")):
            out.add(node.args[0].value)
    return {n for n in out if n == "ppml" or n.startswith("ppml.")}


@pytest.mark.parametrize("path", sorted(NETWORK.glob("*.py")), ids=lambda p: p.name)
def test_a_network_module_imports_nothing_above_the_network(path):
    above = sorted(n for n in imported(path) if not (n == "ppml.network" or n.startswith("ppml.network.")
                                                     or n in ALLOWED))
    assert not above, f"src/ppml/network/{path.name} imports {above}: the network layer imports only itself " \
                      f"and {sorted(ALLOWED)}"


def test_the_import_reader_sees_every_form_of_import(tmp_path):
    """The check above would pass vacuously if the reader missed an import form: each form is found."""
    module = tmp_path / "m.py"
    module.write_text("import ppml.experiment\nfrom ppml.launch import party\nfrom ppml import runtime\n"
                      "from .. import algorithms\nfrom ..data import prepared\n"
                      "def f():\n    import importlib\n    importlib.import_module('ppml.launch.local')\n")
    assert imported(module) == {"ppml.experiment", "ppml.launch.party", "ppml.runtime", "ppml.algorithms",
                                "ppml.data.prepared", "ppml.launch.local"}


def test_the_links_import_neither_carrier():
    assert not imported(NETWORK / "links.py") & CARRIER_MODULES


def test_the_carriers_use_only_public_methods_of_links():
    """The carriers' functions reach a Links they are handed only through its public methods."""
    for name in ("tls_links.py", "grpc_links.py"):
        tree = ast.parse((NETWORK / name).read_text())
        private = sorted({node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                          and isinstance(node.value, ast.Name) and node.value.id == "links"
                          and node.attr.startswith("_")})
        assert not private, f"{name} reads {private} of a Links it was handed"


def test_each_carrier_registers_itself_when_imported():
    assert links.carrier_links("tls") is tls_links.TlsLinks
    assert links.carrier_links("grpc") is grpc_links.GrpcLinks
    assert set(CARRIERS) <= set(links._REGISTERED)


def test_a_carrier_never_imported_is_named_with_the_registered_ones():
    """In a fresh process that imports the links alone, no carrier is registered: opening links names the
    carrier asked for and what is registered, rather than failing somewhere inside."""
    code = ("from ppml.network import links\n"
            "try:\n    links.carrier_links('grpc')\nexcept LookupError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "carrier 'grpc' is not registered (registered: none)" in out, out


def test_make_links_names_an_unregistered_carrier(monkeypatch):
    monkeypatch.delitem(links._REGISTERED, "grpc")
    _, _, credentials = throwaway_set(("a", "b"))
    with pytest.raises(LookupError, match=r"carrier 'grpc' is not registered \(registered: tls\)"):
        links.make_links("grpc", PeerNetwork("a", ("a", "b"), None, 5.0), credentials["a"], {"b": "b"},
                         listen="127.0.0.1:0", session="s")
    with pytest.raises(ValueError, match=r"links must be one of \['tls', 'grpc'\], got 'udp'"):
        links.carrier_links("udp")


def test_a_carrier_is_registered_once():
    with pytest.raises(ValueError, match="carrier 'tls' is registered already"):
        links.register_carrier("tls", grpc_links.GrpcLinks)
    with pytest.raises(ValueError, match="cannot register carrier 'udp'"):
        links.register_carrier("udp", tls_links.TlsLinks)
    links.register_carrier("tls", tls_links.TlsLinks)  # the same factory again (a module reloaded): no change
    assert links.carrier_links("tls") is tls_links.TlsLinks
