#!/usr/bin/env python3
"""Writes the hostile-input corpus in fixtures/hostile/ (issue 10), deterministically.

Every file is built byte by byte here (no layout library), so the corpus does not depend
on any tool's idea of "valid". Run from the repository root:
    python3 scripts/make_hostile_fixtures.py
The files are committed; tests/tests/e2e/hostile.rs runs each through the MCP server.
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hostile")


def rec(rtype, dtype, data=b""):
    n = 4 + len(data)
    return struct.pack(">HBB", n, rtype, dtype) + data


def i2(*v):
    return rec_data(">" + "h" * len(v), v)


def rec_data(fmt, v):
    return struct.pack(fmt, *v)


def s(text):
    b = text if isinstance(text, bytes) else text.encode()
    return b + (b"\0" if len(b) % 2 else b"")


def real8(x):
    """GDSII excess-64 base-16 real."""
    if x == 0:
        return b"\0" * 8
    sign = 0x80 if x < 0 else 0
    x = abs(x)
    e = 64
    while x >= 1:
        x /= 16
        e += 1
    while x < 1 / 16:
        x *= 16
        e -= 1
    m = int(x * (1 << 56))
    return bytes([sign | e]) + m.to_bytes(7, "big")


def header(libname="HOSTILE"):
    return (
        rec(0x00, 0x02, struct.pack(">h", 600))
        + rec(0x01, 0x02, struct.pack(">12h", *([2024, 1, 1, 0, 0, 0] * 2)))
        + rec(0x02, 0x06, s(libname))
        + rec(0x03, 0x05, real8(1e-3) + real8(1e-9))
    )


def bgnstr(name):
    return rec(0x05, 0x02, struct.pack(">12h", *([2024, 1, 1, 0, 0, 0] * 2))) + rec(0x06, 0x06, s(name))


ENDSTR = rec(0x07, 0x00)
ENDLIB = rec(0x04, 0x00)


def boundary(layer, pts):
    xy = b"".join(struct.pack(">ii", x, y) for x, y in pts)
    return (
        rec(0x08, 0x00)
        + rec(0x0D, 0x02, struct.pack(">h", layer))
        + rec(0x0E, 0x02, struct.pack(">h", 0))
        + rec(0x10, 0x03, xy)
        + rec(0x11, 0x00)
    )


def box(layer, x0, y0, x1, y1):
    return boundary(layer, [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)])


def sref(name, x=0, y=0):
    return rec(0x0A, 0x00) + rec(0x12, 0x06, s(name)) + rec(0x10, 0x03, struct.pack(">ii", x, y)) + rec(0x11, 0x00)


def aref(name, cols, rows, pitch):
    xy = struct.pack(">iiiiii", 0, 0, cols * pitch, 0, 0, rows * pitch)
    return (
        rec(0x0B, 0x00)
        + rec(0x12, 0x06, s(name))
        + rec(0x13, 0x02, struct.pack(">hh", cols, rows))
        + rec(0x10, 0x03, xy)
        + rec(0x11, 0x00)
    )


def valid_gds():
    body = box(1, 0, 0, 2000, 100) + box(1, 0, 300, 2000, 400) + box(1, 800, 600, 1200, 1000)
    return header() + bgnstr("TOP") + body + ENDSTR + ENDLIB


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def oasis_uint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def oasis_str(b):
    return oasis_uint(len(b)) + b


def oasis_start():
    # magic, START: version "1.0", unit = 1000 per micron (real type 0), offset-flag 0
    # and the twelve table-offset integers (all zero: no tables).
    return b"%SEMI-OASIS\r\n" + bytes([1]) + oasis_str(b"1.0") + bytes([0]) + oasis_uint(1000) + oasis_uint(0) + oasis_uint(0) * 12


def oasis_end():
    # END: padding b-string then validation scheme 0; the record is 256 bytes long.
    rest = 256 - 1 - 1 - 1  # record id, padding length, validation scheme
    return bytes([2]) + oasis_uint(rest - 1) + b"\0" * (rest - 1) + oasis_uint(0)


def oasis_cell_with_rect():
    # CELL by name "TOP", RECTANGLE on layer 1/0: info byte S W H X Y R D L = 0b01111011
    rect = bytes([20, 0b01111011]) + oasis_uint(1) + oasis_uint(0) + oasis_uint(2000) + oasis_uint(100) + oasis_uint(0) + oasis_uint(0)
    return bytes([14]) + oasis_str(b"TOP") + rect


def deflate_zeros(n):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"\0" * (1 << 20)
    out = bytearray()
    left = n
    while left:
        k = min(left, len(chunk))
        out += c.compress(chunk[:k])
        left -= k
    out += c.flush()
    return bytes(out)


def cblock(payload_len, compressed):
    return bytes([34]) + oasis_uint(0) + oasis_uint(payload_len) + oasis_uint(len(compressed)) + compressed


def main():
    os.makedirs(OUT, exist_ok=True)
    good = valid_gds()
    write("truncated.gds", good[: len(good) // 2])
    flipped = bytearray(good)
    for i in range(7, len(flipped), 23):
        flipped[i] ^= 0x5A
    write("bitflipped.gds", bytes(flipped))
    write("self_reference.gds", header() + bgnstr("TOP") + box(1, 0, 0, 10, 10) + sref("TOP", 5, 5) + ENDSTR + ENDLIB)
    write(
        "mutual_cycle.gds",
        header() + bgnstr("A") + sref("B") + ENDSTR + bgnstr("B") + box(1, 0, 0, 10, 10) + sref("A", 20, 0) + ENDSTR + bgnstr("TOP") + sref("A") + ENDSTR + ENDLIB,
    )
    write(
        "huge_aref.gds",
        header() + bgnstr("LEAF") + box(1, 0, 0, 10, 10) + ENDSTR + bgnstr("TOP") + aref("LEAF", 32767, 32767, 20) + ENDSTR + ENDLIB,
    )
    big = 2**31 - 1
    write("giant_coordinates.gds", header() + bgnstr("TOP") + box(1, -big, -big, big, big) + ENDSTR + ENDLIB)
    write("non_utf8_names.gds", header(b"LIB\xff\xfe") + bgnstr(b"T\xffP\xfe") + box(1, 0, 0, 100, 100) + ENDSTR + ENDLIB)
    # A record that claims more bytes than the file has.
    write("overlong_record.gds", header() + struct.pack(">HBB", 0xFFFE, 0x05, 0x02) + b"\0" * 16)

    start, end = oasis_start(), oasis_end()
    write("valid_small.oas", start + oasis_cell_with_rect() + end)
    write("truncated.oas", (start + oasis_cell_with_rect() + end)[: len(start) + 5])
    # 1 GiB of zeros in a 1 MiB CBLOCK, honestly declared.
    bomb = deflate_zeros(1 << 30)
    write("deflate_bomb.oas", start + bytes([14]) + oasis_str(b"TOP") + cblock(1 << 30, bomb) + end)
    # The same stream declared as 64 bytes: the reader must stop at the declared size.
    small = deflate_zeros(64 << 20)
    write("deflate_lies.oas", start + bytes([14]) + oasis_str(b"TOP") + cblock(64, small) + end)
    # A .glp with a coordinate far beyond 32 bits and one with a garbage line.
    write("giant_coordinates.glp", b"BEGIN\nEQUIV 1 1000 MICRON +X,+Y\nCNAME TOP\nLEVEL M1\nCELL TOP PRIME\n   RECT N M1 0 0 99999999999999999999 10\nENDMSG\n")
    write("garbage.glp", bytes(range(256)) * 16)


if __name__ == "__main__":
    main()
