"""Kernel receive timestamps for the body of an HTTP response (netprobe.net.http1).

A timestamp taken in Python when a read returns includes the event loop's queue: with a few hundred
streams the loop hands over reads in batches and an event waits behind the rest of its batch (P99 of
several ms in bench/sse_streams). The kernel stamps each TCP segment as it arrives (SO_TIMESTAMPNS,
handed over by recvmsg). A plain-HTTP response is read by netprobe.net.socktransport, on either event
loop: this has it read with recvmsg and remembers, for each read, how many body bytes the client had
parsed after it and the kernel's stamp. A body chunk's stamp is then the stamp of the read that
delivered its last byte. An https response (the loop's TLS transport) has no stamps: `attach` returns
None and the caller keeps its own timestamps.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from netprobe.net import rxstamp
from netprobe.net.socktransport import SocketTransport


class KernelStamps:
    def __init__(self, reader: Any, since_ns: int) -> None:
        self._reader = reader
        # (body bytes parsed after a read, that read's kernel stamp); what is already buffered
        # arrived with the headers
        self._reads: deque[tuple[int, int]] = deque([(reader.total_bytes, since_ns)])

    @classmethod
    def attach(cls, response: Any, since_ns: int) -> KernelStamps | None:
        # the response is the connection's protocol: its transport, and its count of body bytes
        transport = getattr(response, "transport", None)
        if not isinstance(transport, SocketTransport) or not hasattr(response, "total_bytes"):
            return None
        sock = transport.get_extra_info("socket")
        try:
            rxstamp.enable(sock)
        except OSError:
            return None
        stamps = cls(response, since_ns)
        transport.anc_size = rxstamp.ANC_SPACE
        transport.after_read = stamps._after_read
        return stamps

    def stamp_for(self, consumed: int) -> int | None:
        """Kernel arrival time of body byte `consumed` (1-based count of bytes read so far)."""
        reads = self._reads
        while len(reads) > 1 and reads[0][0] < consumed:
            reads.popleft()
        return reads[0][1] if reads and reads[0][0] >= consumed else None

    def _after_read(self, anc: list[tuple[int, int, bytes]]) -> None:
        self._reads.append((self._reader.total_bytes, rxstamp.rx_ns(anc) or time.time_ns()))
