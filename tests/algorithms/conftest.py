"""Fixtures of the algorithm tests: short Paillier keys for the protocol tests."""

from __future__ import annotations

import warnings

import pytest

from ppml.crypto import paillier
from ppml.crypto.paillier import KeyLengthWarning, generate_keypair

BITS = 512  # test modules that pass key_bits use the same length


@pytest.fixture(autouse=True)
def short_keys_allowed(monkeypatch):
    """Roles check the length of the key they receive; accept these 512-bit keys."""
    monkeypatch.setattr(paillier, "MIN_KEY_BITS", 256)


@pytest.fixture(scope="module")
def keys(request):
    """One key pair per scheme, shared by a test module: 512-bit, or the module's ``KEY_BITS``."""
    bits = getattr(request.module, "KEY_BITS", BITS)
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setattr(paillier, "MIN_KEY_BITS", 256)
        warnings.simplefilter("ignore", KeyLengthWarning)
        return {scheme: generate_keypair(bits, scheme=scheme) for scheme in ("djn", "plaintext")}
