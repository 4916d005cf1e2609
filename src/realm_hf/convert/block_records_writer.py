"""`block_records.npy` written as the old transformers REALM wrote it, in a stream.

[`write_block_records`] writes byte for byte what `np.save(path, np.array(records, dtype=object))` writes with the
installed NumPy (header, pickle protocol, frames, memo numbering and batches), without holding the records in
memory: benchmarks write a corpus of the paper's size in exactly the old format with it, and
`realm_hf.convert.block_records` reads it back without unpickling.
"""

from __future__ import annotations

import io
import logging
import operator
import os
import pickle
import pickletools
import struct
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .block_records import (
    MEMO_PUT_OPCODES, OP_FRAME, OP_PROTO, PICKLE_BATCH, PICKLE_FRAME_MIN, PICKLE_FRAME_TARGET, RECORD_OPCODES,
)

__all__ = ["write_block_records"]

logger = logging.getLogger(__name__)

@lru_cache(maxsize=None)
def _numpy_save_protocol() -> int:
    """The pickle protocol `np.save` of the installed NumPy writes object arrays with."""
    buffer = io.BytesIO()
    np.save(buffer, np.empty(0, dtype=object), allow_pickle=True)
    data = buffer.getvalue()
    start = 10 + struct.unpack("<H", data[8:10])[0]  # a format 1.0 header
    if data[start] != 0x80:
        raise RuntimeError(f"np.save wrote an object array without a PROTO opcode: {data[start:start + 8]!r}")
    return data[start + 1]


class _StateOnly:
    """Pickles as an object array of `shape` whose element list is empty: what comes before and after the
    records of a real one."""

    def __init__(self, reduce_value: tuple):
        self.reduce_value = reduce_value

    def __reduce__(self) -> tuple:
        return self.reduce_value


@lru_cache(maxsize=64)
def _pickle_template(num_records: int, protocol: int) -> tuple[bytes, int, tuple[int, bytes]]:
    """(the opcodes before the first record, after PROTO and without frames; the memo count there; the memo index
    and object of the `b'b'` that `ndarray.__reduce__` passes, CPython's shared one-byte object, which a record that
    is that same object refers back to)."""
    func, args, state = np.empty(0, dtype=object).__reduce__()
    state = (state[0], (num_records,), *state[2:4], [])
    data = pickle.dumps(_StateOnly((func, args, state)), protocol=protocol)
    ops = list(pickletools.genops(data))
    start = next(pos for op, _, pos in ops if op.code not in (OP_PROTO, OP_FRAME))
    names = [op.name for op, _, _ in ops]
    at = names.index("EMPTY_LIST")
    if len(ops) != at + 6 or names[at + 2] != "TUPLE" or names[at + 4:] != ["BUILD", "STOP"]:
        raise RuntimeError(f"unexpected pickle of an empty object array: {names}")
    end = ops[at + 2][2]
    puts = [i for i, (op, _, _) in enumerate(ops[: at + 2]) if op.code in MEMO_PUT_OPCODES]
    b_at = next(i for i, (op, arg, _) in enumerate(ops) if op.code in RECORD_OPCODES and arg == args[2])
    return data[start:end], len(puts), (puts.index(b_at + 1), args[2])


def _memo_put(index: int, protocol: int) -> bytes:
    if protocol >= 4:
        return b"\x94"
    return b"q" + bytes((index,)) if index < 256 else b"r" + struct.pack("<I", index)


def _memo_get(index: int) -> bytes:
    return b"h" + bytes((index,)) if index < 256 else b"j" + struct.pack("<I", index)


def _as_bytes(record: Any) -> bytes:
    if isinstance(record, str):
        return record.encode("utf-8")
    if isinstance(record, (bytes, bytearray, memoryview)):
        return bytes(record)
    raise TypeError(f"a block record must be bytes or str, got {type(record).__name__}")


_SHORT_BINBYTES = [b"C" + bytes((n,)) for n in range(256)]


def write_block_records(
    path: str | os.PathLike, records_iterable: Iterable[bytes | str], num_records: int, *, protocol: int | None = None
) -> None:
    r"""
    Write block records as the old transformers REALM did (`np.save` of a 1-D object array of `bytes`), streaming.

    The file is byte for byte what `np.save(path, np.array(list(records), dtype=object))` writes with the installed
    NumPy: the same `.npy` header, pickle protocol, FRAME opcodes, memo numbering and APPENDS batches of 1000. Only a
    frame's worth of output (~64 KiB, or one record when larger) is held in memory. Records that are the very same
    object as an earlier record are written as NumPy does (a memo fetch) for empty and one-byte records, the ones
    CPython shares; any other record is written in full, as np.save does for distinct objects. The file appears
    under `path` only once complete (written to a temporary file beside it, then renamed).

    Args:
        path (`str` or `os.PathLike`): The `.npy` file to write.
        records_iterable (`Iterable[bytes | str]`): The records; `str` is written as its UTF-8 bytes.
        num_records (`int`): How many records the iterable yields (the header comes first).
        protocol (`int`, *optional*): Pickle protocol (3, 4 or 5); defaults to the one `np.save` uses (4 with
            NumPy 2). With 3 the file is what `np.save` of NumPy 1.x wrote (`pickle.dump(array, protocol=3)`).

    Raises:
        `ValueError`: The iterable yields more or fewer than `num_records` records (no file is left).
        `TypeError`: A record is not bytes or text.
    """
    num_records = operator.index(num_records)
    if num_records < 0:
        raise ValueError(f"num_records must be >= 0, got {num_records}")
    protocol = _numpy_save_protocol() if protocol is None else operator.index(protocol)
    if protocol not in (3, 4, 5):
        raise ValueError(f"protocol must be 3, 4 or 5, got {protocol}")
    prefix, memo_count, typecode = _pickle_template(num_records, protocol)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb", buffering=1 << 20) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "|O", "fortran_order": False, "shape": (num_records,)})
            f.write(bytes((0x80, protocol)))
            written = _write_pickled_records(
                f, prefix, memo_count, typecode, records_iterable, num_records, protocol
            )
        if written != num_records:
            given = f"more than {num_records}" if written > num_records else str(written)
            raise ValueError(f"write_block_records: {given} records given, num_records is {num_records}")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    logger.info("Wrote %d block records to %s", num_records, path)


def _write_pickled_records(
    f: BinaryIO,
    prefix: bytes,
    memo_count: int,
    typecode: tuple[int, bytes],
    records: Iterable,
    num_records: int,
    protocol: int,
) -> int:
    """What the C pickler writes after PROTO for the array, with its framing (`_Pickler_OpcodeBoundary` before each
    record, large records outside frames, frames under 4 bytes left bare); returns the number of records."""
    framing = protocol >= 4
    frame_header = struct.Struct("<BQ")
    frame = bytearray(prefix)  # the open frame (without protocol 4 framing: just a write buffer)
    # id -> (memo index, the object kept alive) for objects of <= 1 byte already pickled: CPython shares them
    shared: dict[int, tuple[int, bytes]] = {id(typecode[1]): typecode}
    memo_put = b"\x94" if framing else None
    total = 0

    def commit() -> None:
        if framing and len(frame) >= PICKLE_FRAME_MIN:
            f.write(frame_header.pack(0x95, len(frame)))
        f.write(frame)
        frame.clear()

    for record in records:
        if total == num_records:
            return total + 1  # more than announced
        if type(record) is not bytes:
            record = _as_bytes(record)
        if total % PICKLE_BATCH == 0 and num_records > 1:
            frame += b"("  # MARK, before the boundary check of the batch's first record
        if len(frame) >= PICKLE_FRAME_TARGET:
            commit()
        size = len(record)
        if size <= 1 and id(record) in shared:
            frame += _memo_get(shared[id(record)][0])
        else:
            if size < 256:
                frame += _SHORT_BINBYTES[size]
                frame += record
            else:
                if size <= 0xFFFFFFFF:
                    header = b"B" + struct.pack("<I", size)
                elif framing:
                    header = b"\x8e" + struct.pack("<Q", size)
                else:
                    raise ValueError(f"a record of {size} bytes needs pickle protocol 4")
                if size >= PICKLE_FRAME_TARGET:  # written outside any frame
                    if frame:
                        commit()
                    f.write(header)
                    f.write(record)
                else:
                    frame += header
                    frame += record
            if size <= 1 and len(shared) < 65_536:
                shared[id(record)] = (memo_count, record)
            frame += memo_put or _memo_put(memo_count, protocol)
            memo_count += 1
        total += 1
        if total == num_records and num_records == 1:
            frame += b"a"  # APPEND
        elif total % PICKLE_BATCH == 0 or total == num_records:
            frame += b"e"  # APPENDS
    frame += b"t" + _memo_put(memo_count, protocol) + b"b."  # TUPLE, memo, BUILD, STOP
    commit()
    return total
