"""Text drawn aside: a forked child draws one part of a command's output while this process draws
another (a fleet's HTML page is 15 MB of charts, drawn after every figure is known, when the report's
worker is done). Only in a command's own process, after its event loop and worker are gone: nothing
else runs then, so the fork copies one thread, and the child only reads what it was handed."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable, Iterable, Iterator


class Aside:
    """`draw()` run in a forked child from the start, its text read back by `text()`. Where the child
    cannot be made or does not finish, the text is drawn here instead: the same text either way."""

    def __init__(self, draw: Callable[[], Iterable[str]]) -> None:
        self._draw = draw
        self._pid = 0
        self._fd = -1
        if hasattr(os, "fork"):
            self._start()

    def _start(self) -> None:
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:                     # the child: draw, write, leave without running any clean-up
            code = 1
            try:
                os.close(r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                gc.disable()             # a collection would touch, and so copy, every page of the report
                data = "".join(self._draw()).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self._pid, self._fd = pid, r

    def text(self) -> Iterator[str]:
        """The child's text once it is done (or, failing that, this process's)."""
        if not self._pid:
            yield from self._draw()
            return
        chunks = []
        try:
            while block := os.read(self._fd, 1 << 20):
                chunks.append(block)
        finally:
            os.close(self._fd)
            _, status = os.waitpid(self._pid, 0)
            self._pid = 0
        if os.waitstatus_to_exitcode(status) != 0:
            yield from self._draw()
            return
        yield b"".join(chunks).decode()

    def close(self) -> None:
        """The child stopped and reaped, if its text was not read (the output was abandoned)."""
        if self._pid:
            os.kill(self._pid, signal.SIGKILL)
            os.close(self._fd)
            os.waitpid(self._pid, 0)
            self._pid = 0
