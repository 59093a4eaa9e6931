"""Packed Paillier plaintexts: t signed fixed-point values in one ciphertext, and matrix products on them.

A vector of s encrypted values costs s obfuscators (the DJN h_s^alpha of every fresh encryption or
re-randomization), the largest share of the vertical logistic-regression protocols' time. Packing t values
into one plaintext, in slots of B bits,

    P_l = sum_{k < t} m_{l t + k} 2^(k B)            (m signed fixed-point integers; s rows -> ceil(s/t) P_l)

divides that cost by t. Sums of packed vectors and products by one shared plaintext act on every slot
alike, so the protocols' element-wise steps ([d] = [u_A]/4 + u_B/4 - y/2) run on packed ciphertexts
unchanged. A matrix product X^T v (one value per column j, sum_i X_ij v_i) needs each row's own factor:
for slot position k, F_k = prod_l [P_l]^(X_{l t + k, j}) (one multi-exponentiation over the ceil(s/t)
packed ciphertexts, by :meth:`~ppml.crypto.paillier.EncryptedVector.matvec`) holds sum_l X_{lt+k,j} v_{lt+m}
in slot m; the wanted terms are those with m = k. Horner's rule, F <- F^(2^B) F_k for k = 0, ..., t - 1,
shifts slot k of F_k to position t - 1, so slot t - 1 of the result holds exactly sum_i X_ij v_i, the integer
the unpacked product gives, and the 2t - 2 other slots hold cross terms sum_l X_{lt+k,j} v_{lt+m} (k != m),
which the decrypting party must not see. Before the product leaves its party, :meth:`Layout.mask` adds to
every other slot a fresh uniform integer of ``value_bits + mask_bits`` bits (plus an offset that keeps the slot
non-negative): each cross term is then hidden statistically, within 2^-mask_bits in statistical distance,
and the decrypting party reads slot t - 1 alone (:meth:`Layout.read`). In the masked gradient mode of Hardy
et al. the wanted slot is masked too, by a mask its sender keeps.

Widths. Packed values stay below 2^VALUE_INT_BITS, checked by the party that packs them; the protocols add
at most ``addends`` such values (two with one host: [d] = [u_A]/4 + u_B/4 - y/2; K + 1 with K hosts) and scale
by 1/4 (2 more fractional bits), so packed integers stay below 2^input_bits,
input_bits = value_frac_bits + 2 + VALUE_INT_BITS + ceil(log2 addends). Factors stay below 2^FACTOR_INT_BITS
(factor_bits = frac_bits + FACTOR_INT_BITS as integers), over at most ``rows`` rows, and at most ``products``
such products are added before a result is masked (one with one host; the batch loss of K hosts adds K), so
every product slot holds less than 2^value_bits in magnitude with
value_bits = input_bits + factor_bits + ceil(log2 rows) + ceil(log2 products) + 1; a slot is
B = value_bits + mask_bits + 2 bits wide, and the product's 2t - 1 slots fit the safe range of a key while
(2t - 1) B <= key_bits - GUARD_BITS. The defaults (two addends, one product) are the one-host protocols'.
Every party checks its own values against these bounds before packing (:meth:`Layout.pack`), so an
out-of-range value is refused at its source, named, instead of spilling silently into a neighbour's slot.

Threat model: the key stays the same (2048-bit by default); what changes is how the slots a decrypting party
does not need are protected: by statistical masks of ``mask_bits`` bits (distance 2^-mask_bits per slot)
instead of by the encryption itself. Every packed ciphertext still carries a fresh obfuscator.

References
----------
.. [1] P. Paillier, EUROCRYPT 1999; packing several plaintexts into one Paillier plaintext is standard in
   federated learning (e.g. BatchCrypt, Zhang et al., USENIX ATC 2020, and FATE's packed hetero-LR).
.. [2] N. Pippenger, FOCS 1976 (the bucket multi-exponentiation inside each F_k).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppml.crypto.paillier import GUARD_BITS, EncodingOverflowError, EncryptedVector

__all__ = ["VALUE_INT_BITS", "FACTOR_INT_BITS", "Layout", "SlotOverflowError", "layout_for", "max_slots"]

#: Integer bits of every packed value (|u_A|, |d|, |X s|, ...): they must stay below 2^VALUE_INT_BITS.
VALUE_INT_BITS = 8
#: Integer bits of every plaintext factor of a packed product (features, loss coefficients).
FACTOR_INT_BITS = 8


class SlotOverflowError(EncodingOverflowError):
    """A value that its packed slot cannot carry (refused by the party that packs it, named)."""


@dataclass(frozen=True)
class Layout:
    """How t values share one plaintext, and what every slot of a packed product can hold.

    Attributes
    ----------
    slots : int
        t, values per ciphertext (1: no packing).
    width : int
        B, bits per slot.
    input_bits : int
        Packed values satisfy |m| < 2^input_bits (encoded integers).
    value_bits : int
        Every slot of a packed product holds less than 2^value_bits in magnitude before masking.
    mask_bits : int
        Statistical security of the masks on the slots a decrypting party does not need.
    """

    slots: int
    width: int
    input_bits: int
    value_bits: int
    mask_bits: int

    @property
    def wanted(self) -> int:
        """The slot where a packed product's value lands (t - 1)."""
        return self.slots - 1

    @property
    def product_bits(self) -> int:
        """Bits a masked packed product spans: 2t - 1 slots."""
        return (2 * self.slots - 1) * self.width

    def pack(self, values: np.ndarray, *, frac_bits: int, party: str, what: str) -> list[int]:
        """The packed integers of `values` (float64) at `frac_bits`, ceil(len / t) of them.

        Raises
        ------
        SlotOverflowError
            Naming `party`, `what` (the quantity or column) and the row, when a value is not finite or
            does not fit its slot (|value| must stay below 2^VALUE_INT_BITS).
        """
        if frac_bits + VALUE_INT_BITS > self.input_bits:
            raise ValueError(f"values at {frac_bits} fractional bits do not fit {self.input_bits}-bit slots")
        values = np.asarray(values, dtype=np.float64)
        limit = math.ldexp(1.0, VALUE_INT_BITS)
        bad = ~(np.abs(values) < limit)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise SlotOverflowError(
                f"party {party!r}: {what} row {row} is {values[row]:.6g}, beyond the packed slot's bound "
                f"{limit:.6g} (packing: {self.slots} values of {self.width} bits per ciphertext)")
        encoded = [int(v) for v in np.rint(np.ldexp(values, frac_bits)).tolist()]
        return self.join(encoded)

    def join(self, encoded: list[int]) -> list[int]:
        """Group signed integers t at a time: sum_k m_{lt+k} 2^(kB)."""
        t, width = self.slots, self.width
        out = []
        for start in range(0, len(encoded), t):
            acc = 0
            for k, m in enumerate(encoded[start:start + t]):
                acc += m << (k * width)
            out.append(acc)
        return out

    def split(self, packed: list[int], count: int) -> list[int]:
        """The inverse of :meth:`join` for slots that each hold a signed value of fewer than B - 1 bits."""
        width, half = self.width, 1 << (self.width - 1)
        mask = (1 << width) - 1
        out = []
        for p in packed:
            for _ in range(self.slots):
                m = p & mask
                m = m - (1 << width) if m >= half else m
                out.append(m)
                p = (p - m) >> width
        return out[:count]

    def matvec(self, vector: EncryptedVector, X: Any, *, rows: int, frac_bits: int) -> EncryptedVector:
        """The packed X^T v: one ciphertext per column of X with sum_i X_ij v_i in slot t - 1.

        `vector` packs `rows` values (ceil(rows / t) ciphertexts); X has shape (rows, k), encoded at
        `frac_bits`. The other slots hold cross terms: :meth:`mask` them before the result leaves the party.
        """
        t = self.slots
        if X.shape[0] != rows or len(vector) != -(-rows // t):
            raise ValueError(f"a packed product needs {-(-rows // t)} ciphertexts for {rows} rows and X of "
                             f"{rows} rows, got {len(vector)} and {X.shape[0]}")
        planned = vector.matvec_planned(X, frac_bits=frac_bits, slots=t, width=self.width)
        if planned is not None:  # the same ciphertexts as the loop below, when estimated cheaper
            return planned
        out = None
        for k in range(t):
            part = X[k::t]
            if part.shape[0] == 0:  # fewer rows than slots: this position holds nothing
                product = vector[:1].matvec(np.zeros((1, X.shape[1])), frac_bits=frac_bits)
            else:
                product = vector[:part.shape[0]].matvec(part, frac_bits=frac_bits)
            out = product if out is None else out.mul(math.ldexp(1.0, self.width), frac_bits=0) + product
        return out

    def lift(self, vector: EncryptedVector) -> EncryptedVector:
        """An unpacked vector's values moved to slot t - 1 (a product by 2^((t - 1) B)), to be added to a
        packed product's result."""
        shift = self.wanted * self.width
        return vector if shift == 0 else vector.mul(math.ldexp(1.0, shift), frac_bits=0)

    def lift_plain(self, encoded: list[int]) -> list[int]:
        """Signed integers placed in slot t - 1."""
        shift = self.wanted * self.width
        return [m << shift for m in encoded]

    def mask(self, product: EncryptedVector, *, wanted: bool = False) -> tuple[EncryptedVector, list[int]]:
        """`product` with every slot other than t - 1 hidden by a fresh uniform mask (and slot t - 1 too when
        `wanted`); returns the masked vector and the masks of slot t - 1 (zeros unless `wanted`).

        Each mask is uniform below 2^(value_bits + mask_bits), plus 2^value_bits so that every masked slot is
        non-negative and below 2^B: the slots then carry nothing into their neighbours.
        """
        width, bits, offset = self.width, self.value_bits + self.mask_bits, 1 << self.value_bits
        total, kept = [], []
        for _ in range(len(product)):
            acc = 0
            for p in range(2 * self.slots - 1):
                if p == self.wanted and not wanted:
                    continue
                r = secrets.randbits(bits) + offset
                acc += r << (p * width)
                if p == self.wanted:
                    kept.append(r)
            if not wanted:
                kept.append(0)
            total.append(acc)
        return product.add_encoded(total), kept

    def read(self, decrypted: list[int]) -> list[int]:
        """Slot t - 1 of masked packed products (signed decrypted integers), as signed integers.

        The slots below it are non-negative and below 2^B after masking, so they carry nothing; the slot's
        own value is recovered modulo 2^B and centred.
        """
        low = self.wanted * self.width
        width, half = self.width, 1 << (self.width - 1)
        mask = (1 << width) - 1
        out = []
        for m in decrypted:
            m = int(m)
            v = ((m - (m & ((1 << low) - 1))) >> low) & mask
            out.append(v - (1 << width) if v >= half else v)
        return out


def _layout(slots: int, *, value_frac_bits: int, frac_bits: int, rows: int, mask_bits: int, addends: int,
            products: int) -> Layout:
    if addends < 1 or products < 1:
        raise ValueError(f"a packed layout needs addends >= 1 and products >= 1, got {addends} and {products}")
    input_bits = value_frac_bits + 2 + VALUE_INT_BITS + math.ceil(math.log2(addends))
    value_bits = (input_bits + frac_bits + FACTOR_INT_BITS + max(1, math.ceil(math.log2(max(rows, 2))))
                  + math.ceil(math.log2(products)) + 1)
    return Layout(slots=slots, width=value_bits + mask_bits + 2, input_bits=input_bits, value_bits=value_bits,
                  mask_bits=mask_bits)


def max_slots(*, key_bits: int, value_frac_bits: int, frac_bits: int, rows: int, mask_bits: int,
              addends: int = 2, products: int = 1) -> int:
    """The largest t whose packed products fit the safe range of a `key_bits` key (0 if none does)."""
    probe = _layout(1, value_frac_bits=value_frac_bits, frac_bits=frac_bits, rows=rows, mask_bits=mask_bits,
                    addends=addends, products=products)
    return max(0, ((key_bits - GUARD_BITS) // probe.width + 1) // 2)


def layout_for(slots: int, *, key_bits: int, value_frac_bits: int, frac_bits: int, rows: int,
               mask_bits: int, addends: int = 2, products: int = 1) -> Layout:
    """The layout of `slots` values per ciphertext for the given encoding, after checking that it fits.

    Packed inputs carry ``value_frac_bits + 2`` fractional bits at most (the protocols scale a packed value
    by 1/4 once, as 2 more fractional bits) and are sums of at most `addends` checked values; at most
    `products` packed products are added before one is masked (see the module docstring).

    Raises
    ------
    ValueError
        When 2t - 1 slots do not fit the safe range of a `key_bits` key (the message says the largest t).
    """
    layout = _layout(slots, value_frac_bits=value_frac_bits, frac_bits=frac_bits, rows=rows, mask_bits=mask_bits,
                     addends=addends, products=products)
    if slots < 1 or layout.product_bits > key_bits - GUARD_BITS:
        best = max_slots(key_bits=key_bits, value_frac_bits=value_frac_bits, frac_bits=frac_bits, rows=rows,
                         mask_bits=mask_bits, addends=addends, products=products)
        raise ValueError(f"{slots} values per ciphertext need {2 * slots - 1} slots of {layout.width} bits "
                         f"({layout.product_bits} bits), beyond the {key_bits - GUARD_BITS}-bit safe range "
                         f"of a {key_bits}-bit key; at most {best} fit")
    return layout
