"""Text drawn aside: a forked child draws the end of a command's output while this process draws the
start, then writes it to the same output in its turn (a fleet's HTML page is 15 MB of charts, drawn
after every figure is known, when the report's worker is done). Only in a command's own process,
after its event loop and worker are gone: nothing else runs then, so the fork copies one thread, and
the child only reads what it was handed."""

from __future__ import annotations

import codecs
import contextlib
import gc
import os
import signal
from collections.abc import Callable, Iterable
from typing import TextIO

_DREW_NOTHING = 1           # the child's exit code when it failed before writing: drawn here instead
_WRITE_ERROR = 100          # + errno: its write failed (the output is then as broken as this one's)


def _utf8_fd(out: TextIO) -> int | None:
    """The file descriptor under `out`, when bytes written there are the text `out` would write."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):      # io.UnsupportedOperation is an OSError
        return None
    return fd if codecs.lookup(out.encoding or "ascii").name == "utf-8" else None


class Aside:
    """`draw()` run in a forked child from now on; write() puts its text on `out` (after what `out`
    holds by then). Where no child can be made or it fails to draw, the text is drawn here instead:
    the output is the same either way."""

    def __init__(self, draw: Callable[[], Iterable[str]], out: TextIO) -> None:
        self._draw = draw
        self._pid = 0
        self._go = -1
        fd = _utf8_fd(out)
        if fd is not None and hasattr(os, "fork"):
            self._start(fd)

    def _start(self, fd: int) -> None:
        go_r, go_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(go_r)
            os.close(go_w)
            return
        if pid == 0:
            os.close(go_w)
            self._child(fd, go_r)
        os.close(go_r)
        self._pid, self._go = pid, go_w

    def _child(self, fd: int, go: int) -> None:
        """Draw, wait for this output's turn, write, and leave without running any clean-up (the
        buffers it inherited are the parent's to write)."""
        code = _DREW_NOTHING
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            gc.disable()                 # a collection would touch, and so copy, every page of the report
            view = memoryview("".join(self._draw()).encode())
            if os.read(go, 1):           # b"": the parent is gone, or gave up on the output
                try:
                    while view:
                        view = view[os.write(fd, view):]
                    code = 0
                except OSError as exc:
                    code = _WRITE_ERROR + min(exc.errno or 0, 155)
        finally:
            os._exit(code)

    def write(self, out: TextIO) -> None:
        """The text on `out`: the child's turn, or drawn here where it failed to draw."""
        if not self._pid:
            out.writelines(self._draw())
            return
        out.flush()
        with contextlib.suppress(BrokenPipeError):     # it has ended already: its exit code says how
            os.write(self._go, b"w")
        code = self._reap()
        if code == 0:
            return
        if code >= _WRITE_ERROR:
            raise OSError(code - _WRITE_ERROR, os.strerror(code - _WRITE_ERROR))
        if code == -signal.SIGINT:
            raise KeyboardInterrupt
        out.writelines(self._draw())     # it drew nothing: failed, or was killed before its turn

    def _reap(self) -> int:
        os.close(self._go)
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """The child stopped and reaped if it has not written (the output was given up)."""
        if self._pid:
            os.kill(self._pid, signal.SIGKILL)
            self._reap()
