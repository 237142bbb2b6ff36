"""A bounded reader of Thrift's compact protocol: enough to read a Parquet page header ourselves.

pyarrow sizes what it allocates for a page by the page's own header (``uncompressed_page_size``), not
by the column chunk sizes the footer declares, and it does not expose page headers. So a footer that
understates its sizes passes every check made on the footer while its pages decode to gigabytes; the
segment reader reads each page header with this module first (``objects.SegmentReader``), and refuses
a row group whose pages would decode to more than its bound, before pyarrow decodes anything.

Pure (no I/O), and bounded: nesting, container sizes and lengths are checked against what is left of
the buffer before anything is built, so a hostile header costs at most a few times its own size.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import CheckpointError


class ThriftError(CheckpointError):
    """The bytes are not a well-formed compact-protocol struct (the caller names the object)."""


_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
MAX_DEPTH = 8
"""Nesting of a Parquet page header: PageHeader > DataPageHeader > Statistics; more is not a header."""
MAX_ITEMS = 1024
"""Elements of one list, set or map in a page header (Parquet's have none: only its statistics' bytes)."""


def read_struct(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> tuple[dict[int, Any], int]:
    """The struct at ``buf[pos:end]`` as ``{field id: value}`` (ints, bools, floats, bytes, lists and
    nested dicts), and the offset just past it. Raises ``ThriftError`` on anything malformed."""
    reader = _Reader(buf, pos, len(buf) if end is None else min(end, len(buf)))
    return reader.struct(0), reader.pos


class _Reader:
    def __init__(self, buf: bytes | memoryview, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ThriftError("ends inside a struct")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ThriftError("varint longer than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise ThriftError(f"a length of {n} runs past the end")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, kind: int, depth: int) -> Any:
        if kind in (_TRUE, _FALSE):
            return kind == _TRUE
        if kind == _BYTE:
            return self.byte()
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if kind == _BINARY:
            return self.take(self.varint())
        if kind in (_LIST, _SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            self.check_items(size)
            if elem in (_TRUE, _FALSE):  # in a list a bool is a byte of its own
                return [self.byte() == _TRUE for _ in range(size)]
            return [self.value(elem, depth + 1) for _ in range(size)]
        if kind == _MAP:
            size = self.varint()
            self.check_items(size)
            if not size:
                return {}
            types = self.byte()
            pairs = [(self.value(types >> 4, depth + 1), self.value(types & 0x0F, depth + 1)) for _ in range(size)]
            return dict(pairs)
        if kind == _STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"unknown field type {kind}")

    def check_items(self, size: int) -> None:
        # every element takes at least one byte, so a size past what is left is a lie, refused unbuilt
        if size > MAX_ITEMS or size > self.end - self.pos:
            raise ThriftError(f"a container of {size} elements in {self.end - self.pos} bytes")

    def struct(self, depth: int) -> dict[int, Any]:
        if depth > MAX_DEPTH:
            raise ThriftError(f"nested deeper than {MAX_DEPTH}")
        fields: dict[int, Any] = {}
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == _STOP:
                return fields
            delta = head >> 4
            last = last + delta if delta else self.zigzag()
            fields[last] = self.value(kind, depth)
