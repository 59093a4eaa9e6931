"""The K = 1 (one guest, one host, the arbiter) Paillier runs pinned bit for bit: their golden values.

Both protocols, in-process, on the small vertical data of :mod:`test_paillier_sgd`, in several settings
(plaintext mode and 512- or 1024-bit keys, packed and unpacked, masked and coordinator SGD, SQN with S_H = S
and with a sampled S_H). :func:`outcome` reduces a run to what must never change: the History as the stage
writes it (every record and final metric, the weights of each party, floats as exact hex), the network's
per-tag totals and a digest of the whole message sequence (sender, receiver, tag, round, ciphertexts).
Ciphertext randomness, masks and obfuscators cancel exactly, so none of these depends on them; only the byte
counts of runs that carry random integers (encrypted, masked or packed runs) do, and those are left out.

    python tests/algorithms/hetero_lr_golden.py    # rewrites data/hetero_lr_k1_golden.json

The fixture was written before the protocols learned more than one host; ``test_hetero_lr_golden.py``
recomputes it and asserts equality.
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "data" / "hetero_lr_k1_golden.json"

#: name -> (module, params, deterministic bytes). Unmasked plaintext-mode unpacked runs carry no random
#: integer at all, so their byte counts are pinned too.
SETTINGS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "sgd-plain-masked": ("paillier_sgd", dict(encrypted=False, update_at="parties", n=130), False),
    "sgd-plain-coordinator-shuffle-sum": ("paillier_sgd", dict(encrypted=False, update_at="coordinator",
                                                               shuffle=True, host_squares="sum"), True),
    "sgd-djn512-masked": ("paillier_sgd", dict(update_at="parties"), False),
    "sgd-djn512-coordinator-sum": ("paillier_sgd", dict(update_at="coordinator", host_squares="sum"), False),
    "sgd-djn1024-coordinator-packed": ("paillier_sgd", dict(update_at="coordinator", key_bits=1024, frac_bits=16,
                                                            packing="auto", n=130), False),
    "sgd-plain1024-masked-packed": ("paillier_sgd", dict(encrypted=False, update_at="parties", key_bits=1024,
                                                         frac_bits=16, packing="auto"), False),
    "sqn-plain": ("paillier_sqn", dict(encrypted=False, n=130), True),
    "sqn-djn512-sampled": ("paillier_sqn", dict(S_H=60), False),
    "sqn-djn1024-sampled-packed": ("paillier_sqn", dict(S_H=60, key_bits=1024, frac_bits=16, packing="auto"),
                                   False),
    "sqn-plain1024-packed": ("paillier_sqn", dict(encrypted=False, key_bits=1024, frac_bits=16, packing="auto",
                                                  host_squares="sum"), False),
}

BASE = {"paillier_sgd": dict(batch_size=40, key_bits=512, eta=0.5, lam=0.05, max_epochs=3, tol=1e-12),
        "paillier_sqn": dict(batch_size=40, key_bits=512, eta=0.3, lam=0.05, max_epochs=4, tol=1e-12, L=2, M=3)}


def _exact(value: Any, *, with_bytes: bool) -> Any:
    """`value` with every float as its exact hex, timing (and unless `with_bytes` byte counts) left out."""
    if isinstance(value, dict):
        return {str(k): _exact(v, with_bytes=with_bytes) for k, v in value.items()
                if "seconds" not in str(k) and (with_bytes or "bytes" not in str(k))}
    if isinstance(value, (list, tuple)):
        return [_exact(v, with_bytes=with_bytes) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, (float, np.floating)):
        return float(value).hex()
    if isinstance(value, np.integer):
        return int(value)
    raise TypeError(f"unexpected {type(value).__name__} in a run's outcome")


def outcome(history, network, *, with_bytes: bool) -> dict[str, Any]:
    """What a run must reproduce exactly (see the module docstring)."""
    summary = network.summary()
    sequence = [(m.src, m.dst, m.tag, m.round, m.ciphertexts) + ((m.nbytes,) if with_bytes else ())
                for m in network.messages]
    digest = hashlib.sha256(json.dumps(sequence).encode()).hexdigest()
    return _exact({"history": history.to_dict(), "ledger": history.ledger.to_dict(),
                   "tags": summary["tags"], "evaluation": summary.get("evaluation", {}).get("tags", {}),
                   "rounds": summary["rounds"], "messages": len(sequence), "sequence_sha256": digest},
                  with_bytes=with_bytes)


def run_setting(name: str) -> dict[str, Any]:
    """One setting's outcome: the run on the test data, seed 5 for the guest's stream."""
    from ppml.algorithms import paillier_sgd, paillier_sqn
    from ppml.crypto.paillier import KeyLengthWarning
    from ppml.history import ConvergenceWarning
    from test_paillier_sgd import vertical

    module_name, overrides, with_bytes = SETTINGS[name]
    module = {"paillier_sgd": paillier_sgd, "paillier_sqn": paillier_sqn}[module_name]
    overrides = dict(overrides)
    parties = vertical(2, n=overrides.pop("n", 120))
    params = module.Params(**{**BASE[module_name], **overrides})
    network = module.network_for(parties, params, rng=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", KeyLengthWarning)
        history = module.fit(parties, network, params, rng=np.random.default_rng(5))
    return outcome(history, network, with_bytes=with_bytes)


def compute() -> dict[str, Any]:
    return {name: run_setting(name) for name in SETTINGS}


def main() -> int:
    from ppml.crypto import paillier

    sys.path.insert(0, str(HERE))
    paillier.MIN_KEY_BITS = 256  # the tests' short keys (conftest.py's short_keys_allowed)
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
