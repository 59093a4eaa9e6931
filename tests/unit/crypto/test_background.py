"""A party's background process (ppml.crypto.background): fresh zeros, products equal to the in-line ones to
the ciphertext (whichever way a product is shared), and a process that dies or fails ends the run naming the
party.

1024-bit keys: the background process checks the key it is given like any receiver (at least 1024 bits), and
packing needs room for 2t - 1 slots.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from ppml.algorithms import _hetero_lr
from ppml.algorithms._hetero_lr import Encryptor
from ppml.crypto.background import Background, BackgroundError, product
from ppml.crypto.packing import layout_for, max_slots
from ppml.crypto.paillier import KeyLengthWarning, generate_keypair

FRAC = 16
V = _hetero_lr.VALUE_FRAC_BITS


@pytest.fixture(scope="module")
def pair():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KeyLengthWarning)
        return generate_keypair(1024, scheme="djn")


@pytest.fixture(scope="module")
def guest(pair):
    """One party's encryptor with one background process, shared by the product tests."""
    encryptor = Encryptor(pair[0], workers=1, ahead=2, owner="guest")
    yield encryptor
    encryptor.close()


def packed_layout(rows: int):
    t = max_slots(key_bits=1024, value_frac_bits=V, frac_bits=FRAC, rows=rows, mask_bits=80)
    return layout_for(t, key_bits=1024, value_frac_bits=V, frac_bits=FRAC, rows=rows, mask_bits=80)


def test_zeros_are_fresh_encryptions_of_zero_shared_over_the_processes(pair):
    pk, sk = pair
    encryptor = Encryptor(pk, workers=2, ahead=6, owner="host")
    try:
        zeros = encryptor.encrypt(np.zeros(9))  # more than either process keeps ready
        again = encryptor.encrypt(np.full(3, 1.5))
    finally:
        encryptor.close()
    assert np.array_equal(sk.decrypt(zeros), np.zeros(9))
    assert np.array_equal(sk.decrypt(again), np.full(3, 1.5))
    ciphertexts = [int(c) for c in zeros.ciphertexts] + [int(c) for c in again.ciphertexts]
    assert len(set(ciphertexts)) == len(ciphertexts)  # every zero used once


@pytest.mark.parametrize("by_rows", [True, False])
@pytest.mark.parametrize("shape", [(40, 5), (40, 1), (3, 4), (1, 3)])  # one ciphertext, one column
@pytest.mark.parametrize("packed", [True, False])
def test_a_shared_product_is_the_in_line_product_to_the_ciphertext(pair, guest, monkeypatch, by_rows, shape,
                                                                   packed):
    pk, sk = pair
    rows, columns = shape
    rng = np.random.default_rng(rows * 10 + columns)
    layout = packed_layout(40) if packed else None
    u = rng.normal(scale=4, size=rows)
    if packed:
        vector = pk.encrypt_encoded(layout.pack(u, frac_bits=V, party="guest", what="d"), frac_bits=V)
    else:
        vector = pk.encrypt(u, frac_bits=V)
    X = rng.normal(size=(rows, columns))
    # by rows, or the background process takes every other column (not a contiguous block)
    monkeypatch.setattr(_hetero_lr, "split_product",
                        lambda E, width: None if E.shape[2] < 2 or (by_rows and E.shape[1] > 1)
                        else tuple(range(0, E.shape[2], 2)))
    shared = guest.matvec(vector, X, layout=layout, rows=rows, frac_bits=FRAC)
    inline = product(vector, X, layout=layout, rows=rows, frac_bits=FRAC)
    assert shared.frac_bits == inline.frac_bits
    assert [int(c) for c in shared.ciphertexts] == [int(c) for c in inline.ciphertexts]


def test_a_background_process_that_died_ends_the_run_naming_its_party(pair):
    pk, _ = pair
    background = Background(pk, ahead=2, owner="host")
    try:
        background._process.kill()
        background._process.wait(timeout=30)
        gone = r"party 'host': its background process .*(exit code -9|reached)"
        with pytest.raises(BackgroundError, match=gone):
            background.ask_zeros(3)
            background.zeros()
    finally:
        background.close()


def test_a_failed_request_reports_the_background_error_and_the_party(pair):
    pk, _ = pair
    vector = pk.encrypt(np.ones(4), frac_bits=V)
    background = Background(pk, ahead=2, owner="guest")
    try:
        background.ask_product(vector, np.ones((5, 2)), layout=packed_layout(40), rows=5, frac_bits=FRAC)
        failed = r"(?s)party 'guest': its background process failed.*ValueError"
        with pytest.raises(BackgroundError, match=failed):
            background.product()
    finally:
        background.close()
    assert background._process.returncode is not None  # it ended, and close() does not hang


def test_zero_makers_yield_the_cpu_to_the_party_and_its_products(pair):
    """The processes that make zeros run ZERO_NICE lower in priority; the one that computes products does not."""
    pk, _ = pair
    encryptor = Encryptor(pk, workers=1, ahead=2, owner="host")
    try:
        encryptor.encrypt(np.zeros(1))  # the zero maker has started (and lowered its priority)
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        zeros = encryptor._background[0]._process.pid
        products = encryptor._products._process.pid
        assert os.getpriority(os.PRIO_PROCESS, zeros) == min(19, ours + _hetero_lr.ZERO_NICE)
        assert os.getpriority(os.PRIO_PROCESS, products) == ours
    finally:
        encryptor.close()
