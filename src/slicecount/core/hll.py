"""A HyperLogLog built in the process, bit-compatible with Redis's own (hyperloglog.c).

Redis hashes a PFADD value with MurmurHash64A (seed 0xadc83b19); the low 14 bits pick one of
16 384 registers, the rank is 1 + the trailing zeros of the other 50 bits (bit 50 set so the
count stops there). A ``Sketch`` keeps the same registers and encodes them as the string Redis
keeps: ``SET`` it into a key and ``PFCOUNT``/``PFMERGE`` read it like one built by ``PFADD``.
The header's cached cardinality is always marked invalid, so Redis recounts on first read.

Pure Python, no I/O: the hash is the cost (~1 us a value); encoding works on whole byte strings
(``bytes.translate`` and slices) rather than register by register, ~0.1 ms a sketch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from itertools import compress

SEED = 0xADC83B19
P = 14
REGISTERS = 1 << P  # 16 384
INDEX_MASK = REGISTERS - 1
HEADER_SIZE = 16
DENSE_SIZE = HEADER_SIZE + REGISTERS * 6 // 8  # 12 304 bytes, what Redis checks on read
SPARSE_MAX_BYTES = 3000  # Redis's hll-sparse-max-bytes default: past it PFADD goes dense
SPARSE_MAX_VALUE = 32  # a sparse VAL opcode holds 1..32
DENSE, SPARSE = 0, 1

_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1
_RANK_STOP = 1 << (64 - P)
# "HYLL", encoding, 3 unused bytes, cached cardinality with its top bit set (= invalid)
_HEADER_TAIL = bytes(3) + bytes(7) + b"\x80"
_BLOCKS = [struct.Struct(f"<{n}Q") for n in range(64)]


def murmurhash64a(data: bytes, seed: int = SEED) -> int:
    """Redis's MurmurHash64A (little-endian words). Masks only where a right shift needs the
    low 64 bits: a product's bits above 64 never reach the low 64 of the next product."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    blocks = n >> 3
    if blocks:
        for k in _BLOCKS[blocks].unpack_from(data) if blocks < 64 else _words(data, blocks):
            k = (k * _M) & _MASK
            h = ((h ^ ((k ^ (k >> 47)) * _M)) * _M) & _MASK
    tail = n & 7
    if tail:
        h = ((h ^ int.from_bytes(data[n - tail :], "little")) * _M) & _MASK
    h = ((h ^ (h >> 47)) * _M) & _MASK
    return h ^ (h >> 47)


def position(value: str) -> tuple[int, int]:
    """(register, rank) of one value, as Redis's PFADD computes them."""
    h = murmurhash64a(value.encode())
    rest = (h >> P) | _RANK_STOP
    return h & INDEX_MASK, (rest & -rest).bit_length()


class Sketch:
    """16 384 registers, one byte each; ``encode()`` packs them for Redis.

    ``touched`` lists the registers that became non-zero, in the order they did, while there
    are few enough for a sparse encoding: it spares the sparse encoder a scan of all 16 384
    (~0.6 ms here, more than encoding 1 000 values). None once the sketch can only be dense.
    """

    __slots__ = ("registers", "touched")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.registers = bytearray(REGISTERS)
        self.touched: list[int] | None = []
        if values:
            self.update(values)

    def update(self, values: Iterable[str]) -> None:
        """Add values."""
        self.add_hashes(murmurhash64a(value.encode()) for value in values)

    def add(self, value: str) -> None:
        self.update((value,))

    def add_hashes(self, hashes: Iterable[int]) -> None:
        """Add values by their MurmurHash64A (seed SEED), e.g. from a C implementation."""
        registers = self.registers
        touched = self.touched
        for h in hashes:
            rest = (h >> P) | _RANK_STOP
            index = h & INDEX_MASK
            rank = (rest & -rest).bit_length()
            old = registers[index]
            if rank > old:
                registers[index] = rank
                if not old and touched is not None:
                    touched.append(index)
        if touched is not None and len(touched) > SPARSE_MAX_BYTES:
            self.touched = None

    def merge(self, other: Sketch) -> None:
        """Register-wise max, as PFMERGE does."""
        mine, theirs = self.registers, other.registers
        touched = self.touched
        changed = compress(range(REGISTERS), theirs) if other.touched is None else other.touched
        for index in changed:
            old = mine[index]
            if theirs[index] > old:
                mine[index] = theirs[index]
                if not old and touched is not None:
                    touched.append(index)
        if touched is not None and len(touched) > SPARSE_MAX_BYTES:
            self.touched = None

    def __bool__(self) -> bool:
        return bool(self.touched) if self.touched is not None else True

    def encode(self) -> bytes:
        """The smaller of the two encodings Redis reads: sparse while it fits in Redis's own
        sparse limit (so a PFMERGE into a sparse key keeps it sparse), else dense."""
        sparse = self.sparse()
        return sparse if sparse is not None else self.dense()

    def dense(self) -> bytes:
        """12 288 bytes of 6-bit registers, LSB first: registers 4i..4i+3 fill bytes 3i..3i+2."""
        r = bytes(self.registers)
        r0, r1, r2, r3 = r[0::4], r[1::4], r[2::4], r[3::4]
        packed = bytearray(REGISTERS * 6 // 8)
        packed[0::3] = _or(r0, r1.translate(_SHL6))
        packed[1::3] = _or(r1.translate(_SHR2), r2.translate(_SHL4))
        packed[2::3] = _or(r2.translate(_SHR4), r3.translate(_SHL2))
        return b"HYLL" + bytes((DENSE,)) + _HEADER_TAIL + bytes(packed)

    def sparse(self) -> bytes | None:
        """The run-length encoding (ZERO, XZERO, VAL opcodes), or None where Redis would not
        keep one: a register over 32, or longer than SPARSE_MAX_BYTES."""
        if self.touched is None:
            return None
        registers = self.registers
        out = bytearray(b"HYLL" + bytes((SPARSE,)) + _HEADER_TAIL)
        append = out.append
        done = 0  # registers encoded so far
        for index in sorted(self.touched):
            rank = registers[index]
            if rank > SPARSE_MAX_VALUE:
                return None
            gap = index - done
            if gap > 64:  # XZERO, 1..16 384 zeros
                append(0x40 | (gap - 1) >> 8)
                append((gap - 1) & 0xFF)
            elif gap:  # ZERO, 1..64
                append(gap - 1)
            elif index and out[-1] & 3 < 3 and out[-1] >> 2 & 0x1F == rank - 1:
                # no gap after register 1+: the byte before is this run's VAL (at register 0
                # it is the header's, which must stay as it is)
                out[-1] += 1  # the same rank just before: one VAL of up to 4 registers
                done = index + 1
                continue
            append(0x80 | (rank - 1) << 2)  # VAL, one register
            done = index + 1
        gap = REGISTERS - done
        if gap > 64:
            out += bytes((0x40 | (gap - 1) >> 8, (gap - 1) & 0xFF))
        elif gap:
            append(gap - 1)
        return bytes(out) if len(out) <= HEADER_SIZE + SPARSE_MAX_BYTES else None

    @classmethod
    def decode(cls, blob: bytes) -> Sketch:
        """A sketch from a Redis HLL string (dense or sparse), e.g. what GET returns."""
        if blob[:4] != b"HYLL":
            raise ValueError("not a Redis HyperLogLog (no HYLL magic)")
        sketch = cls()
        body = blob[HEADER_SIZE:]
        if blob[4] == DENSE:
            if len(blob) != DENSE_SIZE:
                raise ValueError(f"dense HyperLogLog of {len(blob)} bytes, not {DENSE_SIZE}")
            b0, b1, b2 = body[0::3], body[1::3], body[2::3]
            regs = sketch.registers
            regs[0::4] = b0.translate(_LOW6)
            regs[1::4] = _or(b0.translate(_SHR6), b1.translate(_LOW4_SHL2))
            regs[2::4] = _or(b1.translate(_SHR4), b2.translate(_LOW2_SHL4))
            regs[3::4] = b2.translate(_SHR2)
            sketch.touched = None
            return sketch
        if blob[4] != SPARSE:
            raise ValueError(f"unknown HyperLogLog encoding {blob[4]}")
        index, i = 0, 0
        while i < len(body):
            op = body[i]
            if op & 0x80:  # VAL
                run = (op & 3) + 1
                sketch.registers[index : index + run] = bytes((((op >> 2) & 0x1F) + 1,)) * run
                i += 1
            elif op & 0x40:  # XZERO
                run = ((op & 0x3F) << 8 | body[i + 1]) + 1
                i += 2
            else:  # ZERO
                run = (op & 0x3F) + 1
                i += 1
            index += run
        sketch.touched = list(compress(range(REGISTERS), sketch.registers))
        if index != REGISTERS:
            raise ValueError(f"sparse HyperLogLog covers {index} registers, not {REGISTERS}")
        return sketch


def _words(data: bytes, blocks: int) -> tuple[int, ...]:
    unpack = (
        _BLOCKS[blocks].unpack_from
        if blocks < len(_BLOCKS)
        else struct.Struct(f"<{blocks}Q").unpack_from
    )
    return unpack(data)


def _table(f: Callable[[int], int]) -> bytes:
    """A bytes.translate table applying f to each byte."""
    return bytes(f(v) & 0xFF for v in range(256))


def _or(a: bytes, b: bytes) -> bytes:
    """Byte-wise OR of two equal-length strings, in C (through big ints)."""
    n = len(a)
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(n, "little")


_SHL6, _SHL4, _SHL2 = _table(lambda v: v << 6), _table(lambda v: v << 4), _table(lambda v: v << 2)
_SHR2, _SHR4, _SHR6 = _table(lambda v: v >> 2), _table(lambda v: v >> 4), _table(lambda v: v >> 6)
_LOW6 = _table(lambda v: v & 0x3F)
_LOW4_SHL2 = _table(lambda v: (v & 0x0F) << 2)
_LOW2_SHL4 = _table(lambda v: (v & 0x03) << 4)
