r"""Google's original REALM corpus, `blocks.tfr` (a TFRecord file of block texts), read without TensorFlow.

A TFRecord file is a run of records, each `uint64 length`, `uint32 masked CRC-32C of the length`, `data`, `uint32
masked CRC-32C of the data` (little-endian; masked = rotated right by 15 bits plus 0xa282ead8). Each record of the
REALM block records holds one block's text as raw UTF-8 bytes (what `tf.data.TFRecordDataset` yields). Both checksums
are verified: CRC-32C (Castagnoli) comes from `google-crc32c` or `crc32c` when one is installed, otherwise from a
table in pure Python (slow: ~3 MB/s; `check_crc=False` skips the data checksums).
"""

from __future__ import annotations

import logging
import operator
import os
import struct
from collections.abc import Iterator

from .block_records import BlockRecordsError

logger = logging.getLogger(__name__)

__all__ = ["crc32c", "iter_tfrecord_blocks", "masked_crc32c"]

_FIX = "expected a TFRecord file of block texts (uint64 length, masked CRC-32C, data, masked CRC-32C), like blocks.tfr"
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


def _table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _table()


def _crc32c_python(data: bytes) -> int:
    crc, table = 0xFFFFFFFF, _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    import google_crc32c as _google_crc32c

    def crc32c(data: bytes) -> int:
        """CRC-32C (Castagnoli) of `data` (`google-crc32c`)."""
        return _google_crc32c.value(bytes(data))

except ImportError:
    try:
        import crc32c as _crc32c_package

        def crc32c(data: bytes) -> int:
            """CRC-32C (Castagnoli) of `data` (the `crc32c` package)."""
            return _crc32c_package.crc32c(data)

    except ImportError:

        def crc32c(data: bytes) -> int:
            """CRC-32C (Castagnoli) of `data` (pure Python, byte by byte from a table)."""
            return _crc32c_python(data)


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C a TFRecord stores: the CRC rotated right by 15 bits, plus 0xa282ead8 (mod 2**32)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def iter_tfrecord_blocks(
    path: str | os.PathLike, batch_size: int = 10_000, check_crc: bool = True
) -> Iterator[list[str]]:
    r"""
    Stream the block texts of a TFRecord file (Google's REALM `blocks.tfr`) without TensorFlow.

    Args:
        path (`str` or `os.PathLike`): The TFRecord file (not compressed).
        batch_size (`int`, *optional*, defaults to 10000): Records per yielded list (the last one may be shorter).
        check_crc (`bool`, *optional*, defaults to `True`): Verify the checksum of each record's data (the length's
            is always verified).

    Yields:
        `list[str]`: The next records, decoded as UTF-8 (bytes that are not UTF-8 replaced with U+FFFD; one warning
        counts the records that had any).

    Raises:
        [`BlockRecordsError`]: A checksum does not match or the file ends inside a record: one line with the file and
            the byte offset of the record.
    """
    if operator.index(batch_size) < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    replaced = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset, batch = 0, []
        try:
            while offset < size:
                header = f.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    raise _refuse(path, offset, f"the file ends inside a record header ({len(header)} of 12 bytes)")
                length, length_crc = _HEADER.unpack(header)
                if masked_crc32c(header[:8]) != length_crc:
                    raise _refuse(path, offset, "the CRC-32C of the record length does not match")
                if length > size - offset - _HEADER.size - _FOOTER.size:
                    raise _refuse(path, offset, f"a record of {length} bytes, more than the file has left (truncated?)")
                data = f.read(length)
                (data_crc,) = _FOOTER.unpack(f.read(_FOOTER.size))
                if check_crc and masked_crc32c(data) != data_crc:
                    raise _refuse(path, offset, f"the CRC-32C of the record data ({length} bytes) does not match")
                try:
                    batch.append(data.decode("utf-8"))
                except UnicodeDecodeError:
                    batch.append(data.decode("utf-8", errors="replace"))
                    replaced += 1
                offset += _HEADER.size + length + _FOOTER.size
                if len(batch) >= batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch
        finally:
            if replaced:
                logger.warning("%d records of %s are not valid UTF-8: decoded with errors='replace'", replaced, path)


def _refuse(path: str | os.PathLike, offset: int, what: str) -> BlockRecordsError:
    return BlockRecordsError(f"{path}: byte {offset}: {what}; {_FIX}")
