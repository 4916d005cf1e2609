r"""The corpus file `block_records.npy` of the old transformers REALM, read without unpickling.

The old `RealmRetriever` saved its block texts with `np.save(path, block_records)`, `block_records` being a 1-D NumPy
object array of `bytes` (UTF-8 block texts), and read them back with `np.load(path, allow_pickle=True)`, which runs
pickle: a file from anywhere could execute code. Here the file is never unpickled. [`iter_block_records`] parses the
`.npy` header, then walks the pickle stream after it opcode by opcode (`pickletools.genops`, which only decodes
opcodes and arguments) and accepts only the shape that `np.save` writes for such an array:

    PROTO p                                   (2, 3, 4 or 5; FRAME opcodes from 4 on)
    numpy.core.multiarray._reconstruct        (or numpy._core.multiarray: GLOBAL, or STACK_GLOBAL of two strings)
    numpy.ndarray, (0,), b'b'  TUPLE3 REDUCE  (protocol 2: b'b' is _codecs.encode('b', 'latin1'))
    MARK 1 (n,)                               (the state tuple: version 1, the shape)
         numpy.dtype ('O8', False, True) REDUCE (3, '|', None, None, None, -1, -1, 63) BUILD
         False                                (not Fortran order)
         EMPTY_LIST [MARK record ... APPENDS]* | record APPEND   (batches of 1000)
    TUPLE BUILD STOP

with memo stores (MEMOIZE, or BINPUT / LONG_BINPUT / PUT, numbered in order) after the values and memo fetches (BINGET
/ LONG_BINGET / GET) wherever the same object comes again. A record is a bytes opcode (SHORT_BINBYTES, BINBYTES,
BINBYTES8), a text opcode (SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, taken as it is) or, at protocol 2,
`_codecs.encode(text, 'latin1')` (and `bytes()` for an empty record), which is how pickle writes bytes there. Any other
global or opcode, a REDUCE of anything else, a record that is not bytes or text, an array that is not 1-D, a record
count that disagrees with the header, a truncated file or bytes after the pickle raise [`BlockRecordsError`] with one
line naming the file, the byte offset and what was found. Nothing is ever called or imported from the file's names.

Memory stays flat however many records the file holds: records are handed out batch by batch and not kept in the memo.
A memo fetch of an earlier record (the same bytes object stored twice) is resolved from a sparse table of where each
batch of 1000 records starts: that batch is re-read from the file up to the record. Short resolved records are cached.

[`count_block_records`] reads the count from the header alone; `realm_hf.convert.block_records_writer` writes the
format back, byte for byte as `np.save` does.

Why this module is long: it is one validator of one format, and each of the opcodes it accepts is checked where it
comes, with the line that refuses everything else; split, the walk would be read in pieces that only hold together.
"""

from __future__ import annotations

import ast
import bisect
import logging
import operator
import os
import pickletools
import reprlib
import struct
from array import array
from collections.abc import Iterator
from typing import Any, BinaryIO

logger = logging.getLogger(__name__)

__all__ = [
    "MEMO_PUT_OPCODES", "OP_FRAME", "OP_PROTO", "PICKLE_BATCH", "PICKLE_FRAME_MIN", "PICKLE_FRAME_TARGET", "RECORD_OPCODES", "BlockRecordsError", "count_block_records",
    "iter_block_records",
]

_FIX = (
    "block_records.npy is read without unpickling and only in the form np.save writes for a 1-D object array of "
    "bytes: re-save it with np.save of a 1-D object array of bytes, or pass the blocks as text/Parquet"
)
_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 100_000  # bytes of header dict accepted (np.save writes ~118)
_MAX_LINE = 256  # longest newline-ended argument (GLOBAL module / name, PUT / GET index)
_MAX_PENDING = 1_100  # values on the stack above a MARK (np.save: 1000 records a batch)
_MAX_MEMO = 4_096  # memo entries kept (globals, header values); records are never kept
_MAX_DEPTH = 4  # nested MARKs (np.save: 2)
_CACHE_MAX_ITEMS = 4_096  # resolved memo fetches kept ...
_CACHE_MAX_LEN = 256  # ... when that short
PICKLE_BATCH = 1_000  # pickle's BATCHSIZE: records between MARK and APPENDS
PICKLE_FRAME_TARGET = 64 * 1024  # pickle's FRAME_SIZE_TARGET
PICKLE_FRAME_MIN = 4  # pickle's FRAME_SIZE_MIN


class BlockRecordsError(ValueError):
    """A `block_records.npy` is not the plain 1-D object array of bytes that `np.save` writes (it is never
    unpickled); the message is one line with the file, the byte offset, what was found and how to fix it."""


def _refuse(path: Any, offset: int, what: str) -> BlockRecordsError:
    what = " ".join(str(what).split())
    return BlockRecordsError(f"{path}: byte {offset}: {what}; {_FIX}")


class _ShortRepr(reprlib.Repr):
    """Short reprs for messages: long strings and bytes cut before being printed, nesting cut at 3 levels."""

    def repr_bytes(self, value: bytes, level: int) -> str:
        return repr(value[: self.maxstring]) + ("..." if len(value) > self.maxstring else "")


_SHORT_REPR = _ShortRepr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxstring, _SHORT_REPR.maxother = 3, 60, 60


def _show(value: Any) -> str:
    return _SHORT_REPR.repr(value)


class _Token:
    """A named, inert stand-in for a global or an object under construction; never called."""

    __slots__ = ("name", "built")

    def __init__(self, name: str):
        self.name = name
        self.built = False

    def __repr__(self) -> str:
        return self.name


_RECONSTRUCT = _Token("numpy.core.multiarray._reconstruct")
_NDARRAY = _Token("numpy.ndarray")
_DTYPE = _Token("numpy.dtype")
_ENCODE = _Token("_codecs.encode")
_BYTES = _Token("builtins.bytes")
_SKIP = _Token("<skipped>")
_MISSING = object()
_GLOBALS = {
    "numpy.core.multiarray _reconstruct": _RECONSTRUCT,
    "numpy._core.multiarray _reconstruct": _RECONSTRUCT,
    "numpy ndarray": _NDARRAY,
    "numpy dtype": _DTYPE,
    # protocol 2 only: how pickle writes bytes there (`codecs.encode(latin1 text, 'latin1')`, `bytes()` for b"")
    "_codecs encode": _ENCODE,
    "__builtin__ bytes": _BYTES,
    "builtins bytes": _BYTES,
}
_PROTOCOL2_GLOBALS = (_ENCODE, _BYTES)

# opcode codes (`pickletools` `OpcodeInfo.code`)
OP_PROTO, OP_FRAME, _STOP = "\x80", "\x95", "."
_GLOBAL, _STACK_GLOBAL, _REDUCE, _BUILD = "c", "\x93", "R", "b"
_MARK, _TUPLE, _TUPLE1, _TUPLE2, _TUPLE3, _EMPTY_TUPLE = "(", "t", "\x85", "\x86", "\x87", ")"
_EMPTY_LIST, _APPEND, _APPENDS = "]", "a", "e"
_MEMOIZE = "\x94"
RECORD_OPCODES = frozenset("CB\x8e\x8cX\x8d")  # SHORT_BINBYTES BINBYTES BINBYTES8 SHORT_BINUNICODE BINUNICODE BINUNICODE8
MEMO_PUT_OPCODES = frozenset("pqr\x94")  # PUT BINPUT LONG_BINPUT MEMOIZE
_GETS = frozenset("ghj")  # GET BINGET LONG_BINGET
_SCALARS = {"N": None, "\x88": True, "\x89": False}  # NONE NEWTRUE NEWFALSE
_INTS = frozenset("JKM\x8a")  # BININT BININT1 BININT2 LONG1
_TUPLE_N = {_TUPLE1: 1, _TUPLE2: 2, _TUPLE3: 3}
_OPCODE_PROTOCOL = {op.code: op.proto for op in pickletools.opcodes}


def _is_int(value: Any, expected: int | None = None) -> bool:
    return type(value) is int and (expected is None or value == expected)


def _is_false(value: Any) -> bool:
    return value is False or _is_int(value, 0)


def _is_true(value: Any) -> bool:
    return value is True or _is_int(value, 1)


# ------------------------------------------------------------------------------------------------------ the header
def _read_header(f: BinaryIO, path: Any, size: int) -> tuple[int, int]:
    """(number of records, offset of the pickle) from the `.npy` header, which is checked to be a 1-D object array."""
    start = f.read(8)
    if len(start) < 8 or start[:6] != _MAGIC:
        if _MAGIC.startswith(start):
            raise _refuse(path, len(start), f"the file ends inside the .npy magic ({size} bytes in all)")
        raise _refuse(path, 0, f"not a .npy file: it starts with {_show(start)}, not the magic b'\\x93NUMPY'")
    version = (start[6], start[7])
    if version == (1, 0):
        length_format, encoding = "<H", "latin1"
    elif version in ((2, 0), (3, 0)):
        length_format, encoding = "<I", "latin1" if version == (2, 0) else "utf8"
    else:
        raise _refuse(path, 6, f".npy format version {version[0]}.{version[1]} (known: 1.0, 2.0, 3.0)")
    raw = f.read(struct.calcsize(length_format))
    if len(raw) < struct.calcsize(length_format):
        raise _refuse(path, 8, "the file ends inside the .npy header length")
    (length,) = struct.unpack(length_format, raw)
    if length > _MAX_HEADER:
        raise _refuse(path, 8, f"a .npy header of {length} bytes (at most {_MAX_HEADER} accepted)")
    data_offset = 8 + len(raw) + length
    header = f.read(length)
    if len(header) < length:
        raise _refuse(path, 8 + len(raw), f"the file ends inside the .npy header ({length} bytes announced)")
    try:
        fields = ast.literal_eval(header.decode(encoding))
    except Exception as exc:  # SyntaxError, ValueError, UnicodeDecodeError, MemoryError, RecursionError
        raise _refuse(path, 8 + len(raw), f"a .npy header that is not a Python literal ({type(exc).__name__})")
    if not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}:
        raise _refuse(path, 8 + len(raw), f"a .npy header {_show(fields)} without exactly descr, fortran_order, shape")
    descr, fortran_order, shape = fields["descr"], fields["fortran_order"], fields["shape"]
    if descr not in ("|O", "|O8"):
        raise _refuse(path, 8 + len(raw), f"dtype {_show(descr)}, not an object array ('|O')")
    if fortran_order is not False:
        raise _refuse(path, 8 + len(raw), f"fortran_order {_show(fortran_order)}, not False")
    if not (isinstance(shape, tuple) and len(shape) == 1 and _is_int(shape[0]) and shape[0] >= 0):
        raise _refuse(path, 8 + len(raw), f"shape {_show(shape)}, not a 1-D shape (n,)")
    if data_offset >= size:
        raise _refuse(path, size, "the file ends after the .npy header, before the pickled records")
    return shape[0], data_offset


def count_block_records(path: str | os.PathLike) -> int:
    r"""
    The number of records in a `block_records.npy`, from its header alone (no scan; the records are checked when
    read by [`iter_block_records`]).

    Args:
        path (`str` or `os.PathLike`): The `.npy` file.

    Returns:
        `int`: the length of the 1-D object array.

    Raises:
        [`BlockRecordsError`]: The header is not the one of a 1-D object array.
    """
    with open(path, "rb") as f:
        return _read_header(f, path, os.fstat(f.fileno()).st_size)[0]


# ------------------------------------------------------------------------------------------------- the pickle walk
class _Reader:
    """The open file as `pickletools.genops` reads it, never past its end (a length read from the file cannot make
    it allocate more than the file holds) and with newline-ended arguments capped at `_MAX_LINE` bytes."""

    __slots__ = ("_f", "_size", "_left", "op_start")

    def __init__(self, f: BinaryIO, size: int, position: int):
        self._f, self._size, self._left = f, size, size - position
        self.op_start = position

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > self._left:
            n = self._left
        data = self._f.read(n)
        self._left -= len(data)
        return data

    def readline(self, limit: int = -1) -> bytes:
        line = self._f.readline(min(_MAX_LINE, self._left)) if self._left else b""
        self._left -= len(line)
        return line

    def tell(self) -> int:  # genops asks once per opcode, before reading it
        self.op_start = position = self._size - self._left
        return position

    def seek(self, position: int) -> None:
        self._f.seek(position)
        self._left = self._size - position

    @property
    def left(self) -> int:
        return self._left


class _Walk:
    """One pass over the pickle of a `block_records.npy`: yields the records in the chunks the file holds them."""

    def __init__(self, path: Any, reader: _Reader, num_records: int):
        self.path, self.reader, self.num_records = path, reader, num_records
        self.memo: dict[int, Any] = {}
        self.cache: dict[int, Any] = {}
        # where each batch of records starts: memo count there and file offset (sparse: one entry per 1000 records)
        self.batch_memo, self.batch_pos = array("q"), array("q")
        self.array = self.dtype = self.records = None
        self.emitted = 0

    def refuse(self, offset: int, what: str) -> BlockRecordsError:
        return _refuse(self.path, offset, what)

    def chunks(self) -> Iterator[list]:
        try:
            yield from self._chunks()
        except BlockRecordsError:
            raise
        except (ValueError, struct.error) as exc:  # from genops: truncated argument, unknown opcode, bad UTF-8 ...
            offset = self.reader.op_start
            if not self.reader.left:
                raise self.refuse(offset, f"the file ends inside the pickle (truncated?): {exc}") from None
            raise self.refuse(offset, f"an opcode pickletools cannot decode: {exc}") from None

    def _chunks(self) -> Iterator[list]:
        reader, memo = self.reader, self.memo
        ops = pickletools.genops(reader)
        op, proto, pos = next(ops)
        if op.code != OP_PROTO or not 2 <= proto <= 5:
            raise self.refuse(pos, f"a pickle that starts with {op.name} {_show(proto)}, not PROTO 2 to 5")
        atoms = frozenset(c for c in RECORD_OPCODES if _OPCODE_PROTOCOL[c] <= proto)  # the others are refused below
        stack: list = []
        metastack: list[list] = []
        memo_count = 0
        frame_end = 0
        prev = OP_PROTO
        for op, arg, pos in ops:
            c = op.code
            if c in atoms:  # a record, or a string of the header
                stack.append(arg)
                if len(stack) > _MAX_PENDING:
                    raise self._too_many(pos)
            elif c in MEMO_PUT_OPCODES:
                if c == _MEMOIZE:
                    if proto < 4:
                        raise self.refuse(pos, f"MEMOIZE in a protocol {proto} pickle")
                    arg = memo_count
                elif arg != memo_count:
                    raise self.refuse(pos, f"{op.name} {_show(arg)} out of order (np.save numbers {memo_count} next)")
                if not stack or prev in _GETS:
                    raise self.refuse(pos, f"{op.name} of {'a memo fetch' if stack else 'an empty stack'}")
                memo_count += 1
                value = stack[-1]
                if self.records is None:  # the header part: a few small values, all kept
                    memo[arg] = value
                elif type(value) is str and value == "latin1" and len(stack) > 2 and stack[-3] is _ENCODE:
                    memo[arg] = value
                elif type(value) not in (bytes, str, tuple) and value is not self.records:
                    memo[arg] = value  # a global
                # else: a record, or the text / arguments of an encode call: not kept (a fetch re-reads the file)
                if len(memo) > _MAX_MEMO:
                    raise self.refuse(pos, f"more than {_MAX_MEMO} memo entries that are not records")
            elif c == _APPENDS:
                if not metastack:
                    raise self.refuse(pos, "APPENDS without MARK")
                items, stack = stack, metastack.pop()
                if not stack or stack[-1] is not self.records or self.records is None:
                    raise self.refuse(pos, "APPENDS to something other than the list of records")
                yield self._records(items, pos)
            elif c == _MARK:
                if self.records is not None and stack and stack[-1] is self.records:
                    self.batch_memo.append(memo_count)
                    self.batch_pos.append(pos)
                metastack.append(stack)
                stack = []
                if len(metastack) > _MAX_DEPTH:
                    raise self.refuse(pos, f"MARKs nested more than {_MAX_DEPTH} deep")
            elif c in _GETS:
                value = memo.get(arg, _MISSING)
                if value is _MISSING:
                    value = self._fetch(arg, pos, memo_count)
                stack.append(value)
                if len(stack) > _MAX_PENDING:
                    raise self._too_many(pos)
            elif c == OP_FRAME:
                if proto < 4:
                    raise self.refuse(pos, f"FRAME in a protocol {proto} pickle")
                if pos < frame_end:
                    raise self.refuse(pos, f"a FRAME inside the frame that ends at byte {frame_end}")
                if arg > reader.left:
                    raise self.refuse(pos, f"a FRAME of {arg} bytes with {reader.left} left in the file (truncated?)")
                frame_end = pos + 9 + arg
            elif op.proto > proto:
                raise self.refuse(pos, f"{op.name} (protocol {op.proto}) in a protocol {proto} pickle")
            elif len(stack) >= _MAX_PENDING:
                raise self._too_many(pos)
            elif c in _INTS:
                stack.append(arg)
            elif c in _SCALARS:
                stack.append(_SCALARS[c])
            elif c in _TUPLE_N:
                n = _TUPLE_N[c]
                if len(stack) < n:
                    raise self.refuse(pos, f"{op.name} with {len(stack)} values on the stack")
                value = tuple(stack[-n:])
                del stack[-n:]
                stack.append(value)
            elif c == _TUPLE:
                if not metastack:
                    raise self.refuse(pos, "TUPLE without MARK")
                value = tuple(stack)
                stack = metastack.pop()
                stack.append(value)
            elif c == _EMPTY_TUPLE:
                stack.append(())
            elif c == _GLOBAL or c == _STACK_GLOBAL:
                if c == _STACK_GLOBAL:
                    if len(stack) < 2 or type(stack[-1]) is not str or type(stack[-2]) is not str:
                        raise self.refuse(pos, "STACK_GLOBAL without a module and a name string on the stack")
                    arg = f"{stack[-2]} {stack[-1]}"
                    del stack[-2:]
                token = _GLOBALS.get(arg)
                if token is None or (token in _PROTOCOL2_GLOBALS and proto > 2):
                    module, _, name = arg.partition(" ")
                    raise self.refuse(pos, f"the global {_show(module + '.' + name)}, which np.save never writes here")
                stack.append(token)
            elif c == _REDUCE:
                if len(stack) < 2:
                    raise self.refuse(pos, "REDUCE with fewer than two values on the stack")
                args, func = stack.pop(), stack.pop()
                stack.append(self._reduce(func, args, pos, stack, metastack))
            elif c == _BUILD:
                if len(stack) < 2:
                    raise self.refuse(pos, "BUILD with fewer than two values on the stack")
                self._build(stack[-2], stack.pop(), pos)
            elif c == _EMPTY_LIST:
                self._start_records(stack, metastack, pos, memo_count)
                stack.append(self.records)
            elif c == _APPEND:
                if len(stack) < 2 or stack[-2] is not self.records or self.records is None:
                    raise self.refuse(pos, "APPEND to something other than the list of records")
                yield self._records([stack.pop()], pos)
            elif c == _STOP:
                self._stop(stack, metastack, pos, frame_end)
                return
            else:
                raise self.refuse(pos, f"the opcode {op.name}, which np.save never writes for an array of bytes")
            prev = c

    def _too_many(self, pos: int) -> BlockRecordsError:
        return self.refuse(pos, f"more than {_MAX_PENDING} values on the stack (np.save: batches of 1000 records)")

    def _records(self, items: list, pos: int) -> list:
        if not {type(item) for item in items} <= {bytes, str}:
            for i, item in enumerate(items):
                if type(item) is not bytes and type(item) is not str:
                    raise self.refuse(
                        pos, f"record {self.emitted + i} is {_show(item)} ({type(item).__name__}), not bytes or text"
                    )
        self.emitted += len(items)
        if self.emitted > self.num_records:
            raise self.refuse(pos, f"more than the {self.num_records} records the header announces")
        return items

    def _reduce(self, func: Any, args: Any, pos: int, stack: list, metastack: list) -> Any:
        if func is _ENCODE:
            if type(args) is tuple and len(args) == 2 and type(args[0]) is str and args[1] == "latin1":
                try:
                    return args[0].encode("latin-1")
                except UnicodeEncodeError:
                    pass
        elif func is _BYTES:
            if args == ():
                return b""
        elif func is _RECONSTRUCT:
            if self.array is not None or stack or metastack:
                raise self.refuse(pos, "a second or nested numpy _reconstruct")
            if (type(args) is tuple and len(args) == 3 and args[0] is _NDARRAY and type(args[1]) is tuple
                    and len(args[1]) == 1 and _is_int(args[1][0], 0) and args[2] == b"b"):
                self.array = _Token("<the array>")
                return self.array
        elif func is _DTYPE:
            if self.dtype is not None:
                raise self.refuse(pos, "a second numpy.dtype")
            if (type(args) is tuple and len(args) == 3 and args[0] == "O8" and type(args[0]) is str
                    and _is_false(args[1]) and _is_true(args[2])):
                self.dtype = _Token("<the object dtype>")
                return self.dtype
        else:
            raise self.refuse(pos, f"REDUCE of {_show(func)}, which np.save never calls here")
        raise self.refuse(pos, f"REDUCE of {func.name} with arguments {_show(args)}, not those np.save writes")

    def _build(self, target: Any, state: Any, pos: int) -> None:
        if target is self.dtype and target is not None and not target.built:
            if (type(state) is tuple and len(state) == 8 and _is_int(state[0], 3) and state[1] == "|"
                    and state[2:5] == (None, None, None) and _is_int(state[5], -1) and _is_int(state[6], -1)
                    and _is_int(state[7])):
                target.built = True
                return
            raise self.refuse(pos, f"an object dtype built from {_show(state)}, not the state np.save writes")
        if target is self.array and target is not None and not target.built:
            if (type(state) is tuple and len(state) == 5 and _is_int(state[0], 1) and state[1] == (self.num_records,)
                    and state[2] is self.dtype and _is_false(state[3]) and state[4] is self.records
                    and self.records is not None):
                target.built = True
                return
            raise self.refuse(pos, f"an array built from {_show(state)}, not (1, (n,), dtype, False, records)")
        raise self.refuse(pos, f"BUILD of {_show(target)}, which np.save never writes")

    def _start_records(self, stack: list, metastack: list, pos: int, memo_count: int) -> None:
        if self.records is not None:
            raise self.refuse(pos, "a second list")
        if not (len(metastack) == 1 and metastack[0] == [self.array] and self.array is not None):
            raise self.refuse(pos, "a list outside the state of the reconstructed numpy array")
        if len(stack) != 4 or not _is_int(stack[0], 1):
            raise self.refuse(pos, f"an array state starting {_show(tuple(stack))}, not (1, (n,), dtype, False, ...")
        shape, dtype, fortran = stack[1], stack[2], stack[3]
        if not (type(shape) is tuple and all(_is_int(dim) for dim in shape)):
            raise self.refuse(pos, f"an array shape {_show(shape)}")
        if len(shape) != 1:
            raise self.refuse(pos, f"an array of shape {_show(shape)}, not 1-D")
        if shape[0] != self.num_records:
            raise self.refuse(pos, f"a pickled array of {shape[0]} records; the header says {self.num_records}")
        if dtype is not self.dtype or dtype is None or not dtype.built:
            raise self.refuse(pos, f"an array of dtype {_show(dtype)}, not the object dtype")
        if not _is_false(fortran):
            raise self.refuse(pos, f"an array with Fortran flag {_show(fortran)}, not False")
        self.records = _Token("<the records>")
        self.batch_memo.append(memo_count)
        self.batch_pos.append(pos)

    def _stop(self, stack: list, metastack: list, pos: int, frame_end: int) -> None:
        if metastack or stack != [self.array] or self.array is None or not self.array.built:
            raise self.refuse(pos, f"STOP with {_show(stack)} on the stack, not the built numpy array")
        if self.emitted != self.num_records:
            raise self.refuse(pos, f"{self.emitted} records; the header says {self.num_records}")
        end = pos + 1
        if frame_end > end:
            raise self.refuse(pos, f"STOP inside a frame that ends at byte {frame_end}")
        if self.reader.left:
            raise self.refuse(end, f"{self.reader.left} bytes after the end of the pickle (trailing data)")

    def _fetch(self, index: int, here: int, memo_count: int) -> Any:
        """The record stored as memo entry `index` before byte `here`: re-read from its batch in the file."""
        value = self.cache.get(index, _MISSING)
        if value is not _MISSING:
            return value
        i = bisect.bisect_right(self.batch_memo, index) - 1
        if self.records is None or i < 0 or index >= memo_count:
            raise self.refuse(here, f"a memo fetch of entry {index}, which holds nothing np.save refers back to")
        reader, count = self.reader, self.batch_memo[i]
        back = reader.tell()
        reader.seek(self.batch_pos[i])
        stack: list = []
        prev = None
        try:
            for op, arg, pos in pickletools.genops(reader):
                if pos >= here:
                    break
                c = op.code
                if c in RECORD_OPCODES:
                    stack.append(arg)
                elif c in MEMO_PUT_OPCODES:
                    if count == index:
                        value = stack[-1] if stack else None
                        if (type(value) in (bytes, str) and prev not in _GETS
                                and not (len(stack) > 1 and stack[-2] is _ENCODE)):
                            break
                        value = _MISSING
                        break
                    count += 1
                elif c in _GETS:
                    stack.append(self.memo.get(arg, _SKIP))
                elif c == _GLOBAL:
                    stack.append(_GLOBALS.get(arg, _SKIP))
                elif c == _TUPLE2:
                    stack[-2:] = [tuple(stack[-2:])]
                elif c == _EMPTY_TUPLE:
                    stack.append(())
                elif c == _REDUCE:
                    args, func = stack.pop(), stack.pop()
                    stack.append(self._reduce(func, args, pos, [], []) if func in _PROTOCOL2_GLOBALS else _SKIP)
                elif c in (_MARK, _APPENDS, _APPEND):
                    stack.clear()
                elif c == _EMPTY_LIST:
                    stack.append(self.records)
                elif c != OP_FRAME:
                    break
                prev = c
        except (ValueError, IndexError, struct.error):  # already walked once: cannot happen in a file np.save wrote
            value = _MISSING
        finally:
            reader.seek(back)
        if value is _MISSING or value is _SKIP:
            raise self.refuse(here, f"a memo fetch of entry {index}, which is not a record stored before it")
        if len(value) <= _CACHE_MAX_LEN:
            if len(self.cache) >= _CACHE_MAX_ITEMS:
                self.cache.clear()
            self.cache[index] = value
        return value


def _decode(items: list) -> tuple[list[str], int]:
    """Records as text (UTF-8, as the old retriever's `block.decode()`; undecodable bytes replaced, counted)."""
    try:
        return [item.decode("utf-8") for item in items], 0
    except (UnicodeDecodeError, AttributeError):
        pass
    texts, replaced = [], 0
    for item in items:
        if type(item) is str:
            texts.append(item)
            continue
        try:
            texts.append(item.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(item.decode("utf-8", errors="replace"))
            replaced += 1
    return texts, replaced


def iter_block_records(path: str | os.PathLike, batch_size: int = 10_000) -> Iterator[list[str]]:
    r"""
    Stream the block texts of an old transformers-REALM `block_records.npy` without unpickling it.

    The file is read incrementally (memory does not grow with the number of records) and accepted only in the form
    `np.save` writes for a 1-D object array of `bytes` or `str`, at pickle protocol 2 to 5 (see the module docstring);
    nothing in it is ever executed or imported.

    Args:
        path (`str` or `os.PathLike`): The `.npy` file.
        batch_size (`int`, *optional*, defaults to 10000): Records per yielded list (the last one may be shorter).

    Yields:
        `list[str]`: The next records in file order, decoded as UTF-8 (bytes that are not UTF-8 are replaced with
        U+FFFD, and one warning counts the records that had any); text records are returned as they are.

    Raises:
        [`BlockRecordsError`]: The file is not such an array (another global or opcode, a record that is not bytes
            or text, not 1-D, a count that disagrees with the header, truncated, trailing bytes, ...): one line with
            the file, the byte offset, what was found and how to fix it. Raised when reached: records before the
            offending byte have been yielded already.
    """
    if operator.index(batch_size) < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        num_records, data_offset = _read_header(f, path, size)
        walk = _Walk(path, _Reader(f, size, data_offset), num_records)
        pending: list = []
        replaced = 0
        try:
            for chunk in walk.chunks():
                pending.extend(chunk)
                while len(pending) >= batch_size:
                    texts, bad = _decode(pending[:batch_size])
                    del pending[:batch_size]
                    replaced += bad
                    yield texts
            if pending:
                texts, bad = _decode(pending)
                replaced += bad
                yield texts
        finally:
            if replaced:
                logger.warning("%d records of %s are not valid UTF-8: decoded with errors='replace'", replaced, path)
