"""A party's background process for its Paillier work: encryptions of zero made ahead of time, and encrypted
products X^T [v] on request, a product first.

An encryption under the ``djn`` scheme is one obfuscator h_s^alpha (85 products of 4096-bit numbers with a
12-bit fixed-base table at 2048 bits, eight obfuscators per product call where crypto_mb runs) times
(1 + m n); so a process that keeps encryptions of zero ready turns each of its party's encryptions into one
product. The same process computes products X^T [v] (or a part of one:
:meth:`ppml.crypto.packing.Layout.matvec`, or :meth:`~ppml.crypto.paillier.EncryptedVector.matvec`
unpacked) when asked, beside the party's own process.

Scheduling. The process answers requests in the order they arrive, and between them fills its pool of zeros up
to ``ahead``, in chunks of :data:`ZERO_CHUNK` (about 10 ms at 2048 bits), looking for a request between two
chunks: a request waits for at most one chunk, never behind a queue of zeros (as it did behind a process
pool's first-in-first-out queue). Each zero is sent once and used once. A process that makes zeros may run at
a lower priority (``nice``), so that it fills its pool on cores the protocol's own work leaves idle; one that
is only asked for products never builds the fixed-base table.

The process is started with ``python -m ppml.crypto.background``: it imports this package's crypto modules
only (not the caller's main module, as ``multiprocessing``'s spawn does), so it is ready in about half a
second plus its table. It talks to its parent over a socket pair in pickled messages; both ends are the same
party's code. Every wait of the parent has a limit, and a background process that died, failed or stopped
answering ends the run with a :class:`BackgroundError` naming the party.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from ppml.crypto.packing import Layout
from ppml.crypto.paillier import EncryptedVector, PublicKey

__all__ = ["ANSWER_LIMIT", "Background", "BackgroundError", "TABLE_WINDOW", "ZERO_CHUNK", "product"]

#: Zeros computed between two looks for a request (about 4 ms of work at 2048 bits through crypto_mb, two
#: groups of its eight lanes; 10 ms through gmpy2).
ZERO_CHUNK = 16
#: Digit width of the background process's fixed-base obfuscator table (see PublicKey.build_table): 85
#: products per obfuscator instead of 128, for a table of about 200 MiB built in 1.4 s (crypto_mb) or 2.7 s
#: (gmpy2) at 2048 bits.
TABLE_WINDOW = 12
#: Seconds a live background process may leave a request unanswered before the run ends (a product takes
#: about a second at 2048 bits; this bounds a hung process, not a slow one).
ANSWER_LIMIT = 900.0
# Seconds between two checks that the process is still alive while the parent waits
_CHECK = 1.0


class BackgroundError(RuntimeError):
    """A party's background process died, failed, or did not answer in time."""


def product(vector: EncryptedVector, X: np.ndarray, *, layout: Layout | None, rows: int,
            frac_bits: int) -> EncryptedVector:
    """X^T [v], packed (:meth:`Layout.matvec`) or not."""
    if layout is None:
        return vector.matvec(X, frac_bits=frac_bits)
    return layout.matvec(vector, X, rows=rows, frac_bits=frac_bits)


class Background:
    """The parent's handle on one background process working under `public_key` for party `owner`.

    Requests are sent at once and answered in order: :meth:`ask_zeros` then :meth:`zeros`,
    :meth:`ask_product` then :meth:`product`, so a party can have several processes work at the same time.
    """

    def __init__(self, public_key: PublicKey, *, ahead: int, owner: str, nice: int = 0) -> None:
        self.owner = owner
        self.public_key = public_key
        mine, theirs = socket.socketpair()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the directory that holds the ppml package
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        try:
            self._process = subprocess.Popen([sys.executable, "-m", "ppml.crypto.background",
                                              str(theirs.fileno())],
                                             pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        self._conn = Connection(mine.detach())
        try:
            self._send(("start", public_key.to_wire(), int(ahead), TABLE_WINDOW, int(nice)))
        except BaseException:
            self.close()
            raise

    def ask_zeros(self, count: int) -> None:
        """Ask for `count` fresh encryptions of zero (collected by :meth:`zeros`)."""
        self._send(("zeros", int(count)))

    def zeros(self) -> list[int]:
        """The encryptions of zero asked for first among those not yet collected."""
        return self._answer("zeros")

    def ask_product(self, vector: EncryptedVector, X: np.ndarray, *, layout: Layout | None, rows: int,
                    frac_bits: int) -> None:
        """Ask for X^T [v] (see :func:`product`; collected by :meth:`product`)."""
        self._send(("product", vector.ciphertexts.tolist(), vector.frac_bits, np.ascontiguousarray(X), layout,
                    int(rows), int(frac_bits)))

    def product(self) -> EncryptedVector:
        """The product asked for first among those not yet collected."""
        ciphertexts, frac_bits = self._answer("product")
        return EncryptedVector(self.public_key, ciphertexts, frac_bits)

    def close(self) -> None:
        """Stop the process (its unused zeros are discarded, never reused) and wait for it, briefly."""
        if self._conn.closed:
            return
        try:
            self._conn.send(None)
        except OSError:
            pass
        self._conn.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _send(self, message: Any) -> None:
        try:
            self._conn.send(message)
        except OSError as exc:
            raise self._gone(f"could not be reached ({exc})") from exc

    def _answer(self, kind: str) -> Any:
        began = time.monotonic()
        while not self._conn.poll(_CHECK):
            if self._process.poll() is not None:
                raise self._gone("exited")
            if time.monotonic() - began > ANSWER_LIMIT:
                raise BackgroundError(f"party {self.owner!r}: its background process did not answer a request "
                                      f"for {kind} in {ANSWER_LIMIT:g} s")
        try:
            tag, body = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise self._gone("closed its connection") from exc
        if tag == "error":
            raise BackgroundError(f"party {self.owner!r}: its background process failed:\n{body}")
        if tag != kind:
            raise BackgroundError(f"party {self.owner!r}: its background process answered {tag!r} to a request "
                                  f"for {kind!r}")
        return body

    def _gone(self, what: str) -> BackgroundError:
        code = self._process.poll()
        status = "" if code is None else f" (exit code {code})"
        return BackgroundError(f"party {self.owner!r}: its background process {what}{status}")


# ---------------------------------------------------------------------------------------------------------
# the background process


def _fresh_zeros(key: PublicKey, count: int, window: int) -> list[int]:
    key.build_table(window)  # once: a process that is only asked for products never builds it
    return key.encrypt(np.zeros(count), frac_bits=0).ciphertexts.tolist()


def serve(conn: Connection) -> None:
    """Answer the parent's requests until it sends None or goes away; between requests, fill the pool."""
    start = conn.recv()
    if start is None:
        return
    _, wire, ahead, window, nice = start
    if nice:
        os.nice(nice)
    key = PublicKey.from_wire(wire)
    pool: deque[int] = deque()
    while True:
        if len(pool) < ahead and not conn.poll(0):
            pool.extend(_fresh_zeros(key, min(ZERO_CHUNK, ahead - len(pool)), window))
            continue
        message = conn.recv()
        if message is None:
            return
        if message[0] == "zeros":
            count = message[1]
            if len(pool) < count:
                pool.extend(_fresh_zeros(key, count - len(pool), window))
            conn.send(("zeros", [pool.popleft() for _ in range(count)]))
        elif message[0] == "product":
            _, ciphertexts, vector_frac_bits, X, layout, rows, frac_bits = message
            out = product(EncryptedVector(key, ciphertexts, vector_frac_bits), X, layout=layout, rows=rows,
                          frac_bits=frac_bits)
            conn.send(("product", (out.ciphertexts.tolist(), out.frac_bits)))
        else:
            raise ValueError(f"unknown request {message[0]!r}")


def _main(fd: int) -> None:
    conn = Connection(fd)
    try:
        serve(conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent went away: nothing to answer
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc(limit=20)))
        except OSError:
            pass
        raise SystemExit(1)
    finally:
        conn.close()


if __name__ == "__main__":
    _main(int(sys.argv[1]))
