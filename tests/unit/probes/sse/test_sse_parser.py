"""The event-stream parser against the WHATWG rules: any split of the reads, each rule, bounded memory."""

from __future__ import annotations

import itertools
import re
import tracemalloc
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netprobe.errors import NetprobeError
from netprobe.probes.sse.parser import SseComment, SseEvent, SseParser, SseTooLarge
from tests.support.sse import buffered_bytes, bytes_seen, last_event_id, retry_ms

Item = SseEvent | SseComment


def feed_all(chunks: Sequence[bytes], parser: SseParser | None = None) -> tuple[list[Item], bool]:
    """Feed the reads with timestamps 1, 2, 3, … and close; (items, truncated)."""
    p = parser or SseParser()
    out: list[Item] = []
    for i, c in enumerate(chunks, start=1):
        out.extend(p.feed(c, i))
    return out, p.close()


def events(stream: bytes) -> list[SseEvent]:
    items, _ = feed_all([stream])
    return [e for e in items if isinstance(e, SseEvent)]


def key(item: Item) -> tuple[object, ...]:
    if isinstance(item, SseComment):
        return ("comment", item.text)
    return ("event", item.data, item.event, item.id, item.retry, item.size)


def split_at(stream: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def reference(stream: bytes) -> tuple[list[tuple[object, ...]], bool]:
    """A deliberately naive whole-stream reading of the spec: decode all, split on the three line ends."""
    text = stream.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    lines = re.split("\r\n|\r|\n", text)
    tail = lines.pop()  # text after the last line end: an incomplete line, discarded at end of stream
    out: list[tuple[object, ...]] = []
    data: list[str] = []
    etype = ""
    last_id: str | None = None
    retry: int | None = None
    for line in lines:
        if line == "":
            if data:
                out.append(("event", "\n".join(data), etype or "message", last_id, retry))
            data, etype = [], ""
            continue
        if line.startswith(":"):
            out.append(("comment", line[1:]))
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            etype = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    truncated = bool(data) or tail.partition(":")[0] == "data"
    return out, truncated


def strip_size(items: list[Item]) -> list[tuple[object, ...]]:
    return [k[:5] if k[0] == "event" else k for k in map(key, items)]


# --- generated streams -----------------------------------------------------------------------------------

# Text without line ends but with everything splitlines() would wrongly split on, multi-byte characters,
# NUL, and a BOM character in the middle.
_value = st.text(
    alphabet=st.one_of(
        st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]),
        st.sampled_from(["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x85", "\ufeff", "\0", "é", "€", "😀",
                         " ", ":"]),
    ),
    max_size=12,
)
_eol = st.sampled_from([b"\n", b"\r", b"\r\n"])
_field_line = st.one_of(
    st.builds(lambda v: b"data:" + v.encode(), _value),
    st.builds(lambda v: b"data: " + v.encode(), _value),
    st.just(b"data"),
    st.builds(lambda v: b"event: " + v.encode(), _value),
    st.builds(lambda v: b"id: " + v.encode(), _value),
    st.builds(lambda v: b"retry: " + v.encode(), st.one_of(st.from_regex(r"\A[0-9]{1,6}\Z"), _value)),
    st.builds(lambda v: b"foo: " + v.encode(), _value),
    st.builds(lambda v: b":" + v.encode(), _value),  # comment
    # Raw bytes: invalid UTF-8 must decode to U+FFFD the same way wherever the reads are cut.
    st.builds(lambda v: b"data: " + v.replace(b"\r", b"").replace(b"\n", b""), st.binary(max_size=8)),
)
_block = st.tuples(st.lists(st.tuples(_field_line, _eol), max_size=5), _eol)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    parts: list[bytes] = [b"\xef\xbb\xbf"] if draw(st.booleans()) else []
    for lines, blank_eol in draw(st.lists(_block, max_size=8)):
        for line, eol in lines:
            parts += [line, eol]
        parts.append(blank_eol)
    if draw(st.booleans()):  # sometimes end mid-event or mid-line
        parts.append(draw(_field_line))
    return b"".join(parts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), data=st.data())
def test_any_split_gives_the_same_events_as_the_whole(stream: bytes, data: st.DataObject) -> None:
    # Cuts anywhere, plus cuts aimed at the hard places: between CR and LF, inside a UTF-8 sequence.
    tricky = [i + 1 for i, b in enumerate(stream) if b == 0x0D]
    tricky += [i for i, b in enumerate(stream) if 0x80 <= b < 0xC0]
    anywhere = st.integers(0, len(stream))
    where = st.one_of(anywhere, st.sampled_from(tricky)) if tricky else anywhere
    cuts = data.draw(st.lists(where, max_size=12))
    whole, whole_trunc = feed_all([stream])
    split, split_trunc = feed_all(split_at(stream, cuts))
    assert [key(i) for i in split] == [key(i) for i in whole]
    assert split_trunc == whole_trunc


@settings(max_examples=200, deadline=None)
@given(stream=streams())
def test_whole_stream_matches_a_naive_reading_of_the_spec(stream: bytes) -> None:
    items, truncated = feed_all([stream])
    assert (strip_size(items), truncated) == reference(stream)


@settings(max_examples=100, deadline=None)
@given(stream=streams())
def test_one_byte_reads_give_the_same_events(stream: bytes) -> None:
    whole, _ = feed_all([stream])
    bytewise, _ = feed_all([stream[i:i + 1] for i in range(len(stream))])
    assert [key(i) for i in bytewise] == [key(i) for i in whole]


def test_every_two_way_split_of_a_tricky_stream() -> None:
    # CRLF, lone CR, a CR line followed by an LF-terminated blank line, and multi-byte characters.
    stream = "\ufeffdata: é€😀\r\ndata: \u2028x\r\r\nevent: e\rdata: 1\n\r: c😀\r\n\n".encode()
    whole, _ = feed_all([stream])
    assert [key(i)[:3] for i in whole] == [
        ("event", "é€😀\n\u2028x", "message"), ("event", "1", "e"), ("comment", " c😀")]
    for cut in range(len(stream) + 1):
        got, _ = feed_all([stream[:cut], stream[cut:]])
        assert [key(i) for i in got] == [key(i) for i in whole], cut


# --- one test per rule -----------------------------------------------------------------------------------

@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_each_line_end(eol: bytes) -> None:
    stream = b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert [e.data for e in events(stream)] == ["a\nb", "c"]


def test_mixed_line_ends() -> None:
    assert [e.data for e in events(b"data: a\rdata: b\r\n\ndata: c\n\r")] == ["a\nb", "c"]


def test_cr_at_the_end_of_a_read_and_lf_at_the_start_of_the_next_is_one_line_end() -> None:
    # Were the LF a second line end it would be a blank line and dispatch "a" alone.
    items, _ = feed_all([b"data: a\r", b"\ndata: b\r", b"", b"\n\r", b"\n"])
    assert [(e.data, e.t_ns) for e in items if isinstance(e, SseEvent)] == [("a\nb", 4)]


def test_cr_then_cr_across_reads_is_two_line_ends() -> None:
    items, _ = feed_all([b"data: a\r", b"\r"])
    assert [(e.data, e.t_ns) for e in items if isinstance(e, SseEvent)] == [("a", 2)]


def test_one_leading_bom_is_ignored_even_split_across_reads() -> None:
    assert [e.data for e in events(b"\xef\xbb\xbfdata: a\n\n")] == ["a"]
    items, _ = feed_all([b"\xef", b"\xbb", b"\xbfdata: a\n\n"])
    assert [e.data for e in items if isinstance(e, SseEvent)] == ["a"]


def test_a_second_or_later_bom_is_data() -> None:
    # A second BOM becomes part of the field name "\ufeffdata", an unknown field.
    assert events(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n") == []
    assert [e.data for e in events(b"data: a\n\n\xef\xbb\xbfdata: b\n\n")] == ["a"]
    assert [e.data for e in events(b"data: \xef\xbb\xbfx\n\n")] == ["\ufeffx"]


def test_bytes_held_as_a_possible_bom_that_are_not_one() -> None:
    items, _ = feed_all([b"\xef\xbb", b"x\ndata: a\n\n"])
    assert [e.data for e in items if isinstance(e, SseEvent)] == ["a"]
    assert events(b"\xef\xbbdata: a\n\n") == []  # "\ufffddata" is an unknown field


def test_comments_are_timestamped_and_never_events() -> None:
    items, truncated = feed_all([b": keep-alive\n", b":\n\n", b"data: x\n: mid\n\n"])
    assert items == [
        SseComment(" keep-alive", 1), SseComment("", 2), SseComment(" mid", 3),
        SseEvent("x", t_ns=3, first_t_ns=3, size=8),
    ]
    assert truncated is False


def test_data_without_a_space_after_the_colon() -> None:
    assert [e.data for e in events(b'data:{"seq":0}\n\n')] == ['{"seq":0}']


def test_exactly_one_leading_space_is_removed() -> None:
    assert [e.data for e in events(b"data:  x \n\n")] == [" x "]
    assert [e.event for e in events(b"event:  t\ndata\n\n")] == [" t"]


def test_colons_after_the_first_belong_to_the_value() -> None:
    assert [e.data for e in events(b"data: a: b:c\n\n")] == ["a: b:c"]


def test_multi_line_data_is_joined_with_lf() -> None:
    assert [e.data for e in events(b"data: a\ndata:\ndata: b\ndata\n\n")] == ["a\n\nb\n"]


def test_a_line_without_colon_is_a_field_with_empty_value() -> None:
    assert [(e.data, e.event) for e in events(b"data\n\n")] == [("", "message")]
    assert [(e.data, e.event) for e in events(b"event\ndata: x\n\n")] == [("x", "message")]


def test_unknown_fields_are_ignored() -> None:
    assert [e.data for e in events(b"foo: bar\nDATA: y\nData: z\ndata : w\ndata: x\n\n")] == ["x"]


def test_id_is_kept_across_events_and_ignored_when_it_holds_nul() -> None:
    p = SseParser()
    got = p.feed(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\x009\ndata: c\n\nid\ndata: d\n\n", 0)
    assert [(e.data, e.id) for e in got if isinstance(e, SseEvent)] == [
        ("a", "7"), ("b", "7"), ("c", "7"), ("d", "")]
    assert last_event_id(p) == ""
    assert last_event_id(SseParser()) is None


def test_id_without_data_sets_the_last_event_id_but_dispatches_nothing() -> None:
    p = SseParser()
    assert p.feed(b"id: 42\n\n", 0) == []
    assert last_event_id(p) == "42"


@pytest.mark.parametrize("value", [b"15a", b"-1", b"1.5", b"", b" 100", b"\xd9\xa3", b"1" * 19, b"9" * 5000])
def test_retry_only_ascii_digits(value: bytes) -> None:
    p = SseParser()
    p.feed(b"retry: 1500\n\nretry: " + value + b"\ndata: x\n\n", 0)
    assert retry_ms(p) == 1500


def test_retry_is_in_force_at_dispatch() -> None:
    p = SseParser()
    got = p.feed(b"data: a\n\nretry:3000\ndata: b\n\ndata: c\n\n", 0)
    assert [e.retry for e in got if isinstance(e, SseEvent)] == [None, 3000, 3000]
    assert retry_ms(p) == 3000


def test_empty_data_buffer_dispatches_nothing() -> None:
    assert events(b"event: ping\n\n\n\nid: 1\nretry: 10\nfoo\n\n") == []


def test_event_type_resets_after_dispatch_and_after_an_empty_block() -> None:
    got = events(b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\n\ndata: 3\n\nevent:\ndata: 4\n\n")
    assert [(e.data, e.event) for e in got] == [
        ("1", "a"), ("2", "message"), ("3", "message"), ("4", "message")]


@pytest.mark.parametrize(("chunks", "truncated"), [
    ([b"data: a\n"], True),
    ([b"data: a\r"], True),
    ([b'data: {"seq": 1'], True),       # cut inside the data line
    ([b"data"], True),
    ([b"data: a\n\n"], False),
    ([b"data: a\n\n: keep-alive"], False),
    ([b"event: x\nid: 3\n"], False),     # nothing to dispatch
    ([b"event: x"], False),
    ([], False),
])
def test_a_partial_event_at_close_is_truncated(chunks: list[bytes], truncated: bool) -> None:
    _, got = feed_all(chunks)
    assert got is truncated


def test_feed_after_close_is_a_programming_error() -> None:
    p = SseParser()
    p.close()
    with pytest.raises(RuntimeError):
        p.feed(b"data: x\n\n", 0)


def test_u2028_and_other_splitlines_separators_stay_inside_one_data_line() -> None:
    payload = '{"content":"a\u2028b\u2029c\x0bd\x0ce\x1cf\x1dg\x1eh\x85i"}'
    got = events(b"data: " + payload.encode() + b"\n\n")
    assert [e.data for e in got] == [payload]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert [e.data for e in events(b"data: a\xffb\xe2\x82\n\n")] == ["a\ufffdb\ufffd"]


def test_a_multi_byte_character_split_across_reads() -> None:
    raw = "data: é€😀\n\n".encode()
    for cut in range(6, 16):
        items, _ = feed_all([raw[:cut], raw[cut:]])
        assert [e.data for e in items if isinstance(e, SseEvent)] == ["é€😀"]


def test_event_times_are_the_dispatching_read_and_the_read_where_the_first_line_began() -> None:
    p = SseParser()
    assert p.feed(b": early comment\nda", 10) == [SseComment(" early comment", 10)]
    assert p.feed(b"ta: a\ndata: b\n", 20) == []
    [ev] = p.feed(b"\n", 30)
    assert isinstance(ev, SseEvent)
    assert (ev.data, ev.t_ns, ev.first_t_ns) == ("a\nb", 30, 10)
    # An event whose first line is a non-data field starts there; the dispatch is the blank line's read.
    assert p.feed(b"event: t\n", 40) == []
    [ev] = p.feed(b"data: c\n\n", 50)
    assert isinstance(ev, SseEvent)
    assert (ev.event, ev.t_ns, ev.first_t_ns) == ("t", 50, 40)
    # A comment before the event does not start it.
    p.feed(b": ping\n", 60)
    assert p.feed(b": ping\ndata: d\r", 70) == [SseComment(" ping", 70)]
    [ev2] = p.feed(b"\n\n", 80)
    assert isinstance(ev2, SseEvent)
    assert (ev2.data, ev2.t_ns, ev2.first_t_ns) == ("d", 80, 70)


def test_size_counts_the_field_lines_with_their_line_ends() -> None:
    stream = b"event: e\r\n: comment\r\ndata: abc\r\n\r\n"
    [whole] = events(stream)
    assert whole.size == len(b"event: e\r\n") + len(b"data: abc\r\n")
    # The same when the CRLF after a field line is split across reads.
    items, _ = feed_all([b"event: e\r", b"\ndata: abc\r", b"\n\r\n"])
    assert [e.size for e in items if isinstance(e, SseEvent)] == [whole.size]


def test_bytes_seen_counts_everything_fed() -> None:
    p = SseParser()
    p.feed(b"\xef\xbb", 0)
    p.feed(b"\xbfdata: x\r\n\r\n: c", 1)
    assert bytes_seen(p) == 2 + 15


# --- caps and memory -------------------------------------------------------------------------------------

def test_too_large_is_a_netprobe_error() -> None:
    assert issubclass(SseTooLarge, NetprobeError)


def test_a_huge_event_raises_and_memory_stays_bounded() -> None:
    cap = 64 * 1024
    p = SseParser(max_event_bytes=cap)
    line = b"data: " + b"x" * 1000 + b"\n"
    chunk = line * 8
    with pytest.raises(SseTooLarge) as info:
        for i in range(1000):
            p.feed(chunk, i)
            assert buffered_bytes(p) <= cap
    assert i * len(chunk) <= cap + len(chunk)
    assert info.value.events == []
    assert buffered_bytes(p) == 0
    with pytest.raises(SseTooLarge):  # spent: it does not pick up mid-stream
        p.feed(b"\n\ndata: x\n\n", 0)
    assert p.close() is False


def test_an_endless_line_raises_and_memory_stays_bounded() -> None:
    cap = 256 * 1024
    chunk = b"x" * 16 * 1024
    p = SseParser(max_event_bytes=1 << 30, max_line_bytes=cap)
    tracemalloc.start()
    try:
        with pytest.raises(SseTooLarge):
            for i in range(10_000):
                p.feed(chunk, i)
                assert len(p._tail) <= cap + len(chunk)
                assert buffered_bytes(p) <= cap
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert i <= cap // len(chunk) + 1
    assert peak < 1.5 * cap + 4 * len(chunk)


def test_the_line_cap_defaults_to_the_event_cap_and_covers_comments() -> None:
    p = SseParser(max_event_bytes=100)
    with pytest.raises(SseTooLarge):
        p.feed(b":" + b"c" * 200 + b"\n", 0)
    p = SseParser(max_event_bytes=1000, max_line_bytes=10)
    with pytest.raises(SseTooLarge):
        p.feed(b"data: 0123456789\n", 0)


def test_within_the_caps_nothing_is_raised_and_buffers_drain() -> None:
    p = SseParser(max_event_bytes=100)
    for i in range(1000):  # an endless stream of small events and comments is fine
        p.feed(b": ping\ndata: " + b"x" * 80 + b"\n\n", i)
    assert buffered_bytes(p) == 0


def test_events_before_the_oversized_one_in_the_same_read_are_kept_on_the_error() -> None:
    p = SseParser(max_event_bytes=50)
    with pytest.raises(SseTooLarge) as info:
        p.feed(b"data: ok\n\n: c\ndata: " + b"y" * 100 + b"\n\n", 5)
    assert info.value.events == [SseEvent("ok", t_ns=5, first_t_ns=5, size=9), SseComment(" c", 5)]
