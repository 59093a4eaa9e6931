"""The in-process transport's deterministic order: one program at a time, handed over only at a wait."""

from __future__ import annotations

import threading
from typing import Any, Callable

from ppml.network.errors import ProtocolError

__all__ = ["Scheduler"]


class _Aborted(BaseException):
    """Raised inside a waiting program when another program failed: unwinds it without masking that error."""


class Scheduler:
    """One program at a time, handed over only at a wait: the in-process transport's deterministic order."""

    def __init__(self, order: list[str]) -> None:
        self._order = order
        self._cv = threading.Condition()
        self._current: str | None = None
        self._waits: dict[str, tuple[Callable[[], bool], str]] = {}
        self._done: set[str] = set()
        self._error: BaseException | None = None

    def _runnable(self, name: str) -> bool:
        if name in self._done:
            return False
        wait = self._waits.get(name)
        return wait is None or wait[0]()

    def _hand_over(self, after: str) -> None:
        """Give the turn to the first program after `after` (cyclically) that can go on. Holds the lock."""
        i = self._order.index(after)
        for name in self._order[i + 1:] + self._order[:i + 1]:
            if self._runnable(name):
                self._current = name
                break
        else:
            self._current = None
            if len(self._done) < len(self._order) and self._error is None:
                waits = "; ".join(f"{n} waits for {w[1]}" for n, w in self._waits.items())
                self._error = ProtocolError(f"protocol deadlock: every unfinished party waits for a message "
                                            f"nobody will send ({waits})")
        self._cv.notify_all()

    def _await_turn(self, name: str) -> None:
        self._cv.wait_for(lambda: self._current == name or self._error is not None)
        if self._error is not None:
            raise _Aborted

    def wait(self, name: str, ready: Callable[[], bool], what: str) -> None:
        """Called by program `name` when what it needs (`what`) is not there: hand over until `ready()`."""
        with self._cv:
            self._waits[name] = (ready, what)
            self._hand_over(name)
            self._await_turn(name)
            del self._waits[name]

    def run(self, programs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        results: dict[str, Any] = {}

        def body(name: str, program: Callable[[], Any]) -> None:
            try:
                with self._cv:
                    self._await_turn(name)
                results[name] = program()
            except _Aborted:
                pass
            except BaseException as exc:  # noqa: BLE001 - re-raised by run() in the caller's thread
                with self._cv:
                    if self._error is None:
                        if hasattr(exc, "add_note"):  # Python >= 3.11
                            exc.add_note(f"(in the program of party {name!r})")
                        self._error = exc
            with self._cv:
                self._done.add(name)
                self._waits.pop(name, None)
                if self._current == name or self._error is not None:
                    self._hand_over(name)

        threads = [threading.Thread(target=body, args=item, name=f"party-{item[0]}", daemon=True)
                   for item in programs.items()]
        with self._cv:
            self._current = self._order[0]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self._error is not None:
            raise self._error
        return results
