"""One guest and one host (K = 1): both Paillier protocols reproduce the values pinned before they learned more
hosts, to the last bit (models, losses, every metric, the message sequence; :mod:`hetero_lr_golden`)."""

from __future__ import annotations

import json

import pytest

from hetero_lr_golden import GOLDEN, SETTINGS, run_setting

PINNED = json.loads(GOLDEN.read_text())


def test_the_fixture_pins_every_setting():
    assert sorted(PINNED) == sorted(SETTINGS)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_k1_run_equals_its_golden_values(name):
    assert run_setting(name) == PINNED[name]
