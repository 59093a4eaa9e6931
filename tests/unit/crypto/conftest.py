"""Short (512-bit) keys for the crypto unit tests: allowed by every receiver, and one fresh DJN pair per module."""

from __future__ import annotations

import warnings

import pytest

from ppml.crypto import paillier
from ppml.crypto.paillier import KeyLengthWarning, generate_keypair

BITS = 512


@pytest.fixture(scope="module")
def djn_pair():
    """A fresh 512-bit DJN key pair (public, private) for this module."""
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setattr(paillier, "MIN_KEY_BITS", 256)
        warnings.simplefilter("ignore", KeyLengthWarning)
        yield generate_keypair(BITS, scheme="djn")


@pytest.fixture(autouse=True)
def short_keys_allowed(monkeypatch):
    """Receivers validate key lengths too (PublicKey, from_wire); accept these 512-bit keys."""
    monkeypatch.setattr(paillier, "MIN_KEY_BITS", 256)
