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
def keys():
    """One 512-bit key pair per scheme, shared by a test module."""
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setattr(paillier, "MIN_KEY_BITS", 256)
        warnings.simplefilter("ignore", KeyLengthWarning)
        return {scheme: generate_keypair(BITS, scheme=scheme) for scheme in ("djn", "plaintext")}
