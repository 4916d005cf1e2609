"""`realm_hf.convert.block_records`: the old `block_records.npy` read without unpickling, refused in any other form,
streamed in flat memory, and written back byte for byte as `np.save` writes it; `realm_hf.convert.tfrecord`."""

import io
import logging
import os
import pickle
import pickletools
import struct
import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from realm_hf.convert.block_records import BlockRecordsError, count_block_records, iter_block_records
from realm_hf.convert.block_records_writer import write_block_records
from realm_hf.convert.tfrecord import crc32c, iter_tfrecord_blocks, masked_crc32c

OLD_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "old_realm" / "openqa" / "block_records.npy"


def npy_header(shape: tuple, descr: str = "|O") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def save_with_protocol(path: Path, array: np.ndarray, protocol: int, shape: tuple | None = None) -> Path:
    """What np.save writes, at any pickle protocol (NumPy 1.x wrote 2 then 3, NumPy 2 writes 4)."""
    path.write_bytes(npy_header(array.shape if shape is None else shape) + pickle.dumps(array, protocol=protocol))
    return path


def read_all(path: Path, batch_size: int = 10_000) -> list[str]:
    return [text for batch in iter_block_records(path, batch_size=batch_size) for text in batch]


def fresh(data: bytes) -> bytes:
    """`data` as a new object (not the compiler's shared constant), as records read from anywhere are."""
    return bytes(bytearray(data))


def varied_records(n: int, seed: int = 0) -> list[bytes]:
    """Records of 0 to ~70,000 bytes: empty, one byte (objects CPython shares), over 255 and over 65,535 bytes."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, size=n)
    for i in range(0, n, 97):
        lengths[i] = (0, 1, 2, 255, 256, 300, 65_535, 65_536, 70_000)[(i // 97) % 9]
    blob = rng.integers(0, 256, size=int(lengths.max(initial=0)) + n, dtype=np.uint8).tobytes()
    return [blob[i : i + int(length)] for i, length in enumerate(lengths)]


def one_line(err: pytest.ExceptionInfo, path: Path) -> str:
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "np.save" in message, message
    return message


# ------------------------------------------------------------------------------------------------------ reading
def test_round_trip_np_save_batches_and_utf8(tmp_path):
    texts = [f"block {i}: Zürich, 東京, naïve — {'x' * i}" for i in range(10)]
    path = tmp_path / "block_records.npy"
    np.save(path, np.array([t.encode("utf-8") for t in texts], dtype=object), allow_pickle=True)
    assert count_block_records(path) == 10
    batches = list(iter_block_records(path, batch_size=3))
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert [t for b in batches for t in b] == texts
    assert list(iter_block_records(str(path))) == [texts]  # str paths too


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_round_trip_every_protocol(tmp_path, protocol, caplog):
    x = fresh(b"the same bytes object, twice")
    records = [x, b"", x, b"y", b"", "caf\u00e9".encode(), b"\xff\xfe not utf-8", "a str element: \u00e9", b"z" * 300,
               b"w" * 70_000, x]
    path = save_with_protocol(tmp_path / "r.npy", np.array(records, dtype=object), protocol)
    expected = [r.decode("utf-8", errors="replace") if isinstance(r, bytes) else r for r in records]
    with caplog.at_level(logging.WARNING, logger="realm_hf.convert.block_records"):
        assert read_all(path, batch_size=4) == expected
    warnings = [r for r in caplog.records if "not valid UTF-8" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].getMessage().startswith("1 records")


def test_numpy_1_module_name(tmp_path):
    """NumPy 1.x named the reconstructor numpy.core.multiarray._reconstruct (and wrote protocol 3 or 2)."""
    for protocol in (2, 3):
        data = save_with_protocol(tmp_path / "new.npy", np.array([b"a", b"bc"], dtype=object), protocol).read_bytes()
        assert b"cnumpy._core.multiarray\n_reconstruct\n" in data
        path = tmp_path / f"numpy1-{protocol}.npy"
        path.write_bytes(data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
        assert read_all(path) == ["a", "bc"]


def test_np_save_writes_protocol_4_frames_and_memo(tmp_path):
    """What the installed NumPy writes, as the module docstring describes it."""
    path = tmp_path / "r.npy"
    x = fresh(b"xx")
    np.save(path, np.array([x, x, b"y" * 70_000], dtype=object))
    data = path.read_bytes()
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data[128:])]
    names = [name for name, _ in ops]
    assert names[0] == "PROTO" and ops[0][1] == 4 and "FRAME" in names
    assert ("SHORT_BINUNICODE", "_reconstruct") in ops and names.count("STACK_GLOBAL") == 3
    tail = names[names.index("EMPTY_LIST"):]
    assert tail[:7] == ["EMPTY_LIST", "MEMOIZE", "MARK", "SHORT_BINBYTES", "MEMOIZE", "BINGET", "BINBYTES"]
    assert read_all(path) == ["xx", "xx", "y" * 70_000]


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_memo_fetch_of_an_earlier_record(tmp_path, protocol):
    """The same bytes object stored twice is a memo fetch; it is re-read from the file, across batches too."""
    x = fresh(b"x" * 50)
    path = tmp_path / "dup.npy"
    np.save(path, np.array([x, x, b"y"], dtype=object))
    assert any(op.name == "BINGET" for op, _, _ in pickletools.genops(path.read_bytes()[128:]))
    assert read_all(path) == ["x" * 50, "x" * 50, "y"]

    records = [fresh(b"record %d" % i) for i in range(2_500)]
    records[1_500], records[2_400], records[999], records[2_499] = records[10], records[2_399], records[1_000], b""
    records[7] = b""  # the empty record is one shared object: every later one is a fetch of the first
    path = save_with_protocol(tmp_path / f"dup{protocol}.npy", np.array(records, dtype=object), protocol)
    assert read_all(path, batch_size=700) == [r.decode() for r in records]


def test_old_transformers_fixture_matches_np_load():
    if not OLD_FIXTURE.exists():
        pytest.skip("no tests/fixtures/old_realm/openqa/block_records.npy")
    expected = [b.decode() for b in np.load(OLD_FIXTURE, allow_pickle=True)]  # our own fixture: safe to unpickle
    assert count_block_records(OLD_FIXTURE) == len(expected)
    assert read_all(OLD_FIXTURE) == expected


# ------------------------------------------------------------------------------------------------------ refusing
class RunsACommand:
    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class CallsEval:
    def __reduce__(self):
        return eval, ("1 + 1",)


class CallsSubprocess:
    def __reduce__(self):
        return subprocess.check_call, (["true"],)


def global_offsets(data: bytes, start: int) -> list[int]:
    return [start + pos for op, _, pos in pickletools.genops(data[start:]) if op.name in ("GLOBAL", "STACK_GLOBAL")]


@pytest.mark.parametrize("protocol", [2, 4])
def test_refuses_a_pickle_that_would_run_a_command(tmp_path, protocol):
    marker = tmp_path / "pwned"
    header = npy_header((1,))
    data = header + pickle.dumps(RunsACommand(f"touch {marker}"), protocol=protocol)
    path = tmp_path / "evil.npy"
    path.write_bytes(data)
    with pytest.raises(BlockRecordsError) as err:
        read_all(path)
    message = one_line(err, path)
    assert f"byte {global_offsets(data, len(header))[0]}:" in message and "system" in message
    assert not marker.exists()


@pytest.mark.parametrize("payload", [CallsEval(), CallsSubprocess()], ids=["eval", "subprocess"])
def test_refuses_other_globals(tmp_path, payload):
    header = npy_header((1,))
    data = header + pickle.dumps(payload, protocol=3)
    path = tmp_path / "evil.npy"
    path.write_bytes(data)
    with pytest.raises(BlockRecordsError) as err:
        read_all(path)
    assert f"byte {global_offsets(data, len(header))[0]}:" in one_line(err, path)


def test_refuses_a_command_among_the_records(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.npy"
    np.save(path, np.array([b"a", b"b", RunsACommand(f"touch {marker}")], dtype=object))
    with pytest.raises(BlockRecordsError, match="global 'posix.system'|global 'os.system'"):
        read_all(path)
    assert not marker.exists()


def test_refuses_records_that_are_not_bytes(tmp_path):
    path = tmp_path / "ints.npy"
    np.save(path, np.array([1, 2, 3], dtype=object))
    with pytest.raises(BlockRecordsError, match=r"record 0 is 1 \(int\), not bytes or text") as err:
        read_all(path)
    one_line(err, path)


def test_refuses_two_dimensional_arrays(tmp_path):
    array = np.array([[b"a", b"b"], [b"c", b"d"]], dtype=object)
    path = tmp_path / "2d.npy"
    np.save(path, array)
    with pytest.raises(BlockRecordsError, match=r"shape \(2, 2\), not a 1-D shape") as err:
        read_all(path)
    one_line(err, path)
    with pytest.raises(BlockRecordsError, match=r"shape \(2, 2\), not a 1-D shape"):
        count_block_records(path)
    # a 1-D header in front of a 2-D pickle: refused at the array's state
    path = save_with_protocol(tmp_path / "lying.npy", array, 4, shape=(4,))
    with pytest.raises(BlockRecordsError, match=r"an array of shape \(2, 2\), not 1-D"):
        read_all(path)


def test_refuses_a_count_that_disagrees_with_the_header(tmp_path):
    path = save_with_protocol(tmp_path / "count.npy", np.array([b"a", b"b"], dtype=object), 4, shape=(3,))
    assert count_block_records(path) == 3
    with pytest.raises(BlockRecordsError, match="pickled array of 2 records; the header says 3") as err:
        read_all(path)
    one_line(err, path)


def test_refuses_arrays_that_are_not_object_arrays(tmp_path):
    path = tmp_path / "float.npy"
    np.save(path, np.array([1.0, 2.0]))
    with pytest.raises(BlockRecordsError, match="dtype '<f8', not an object array") as err:
        read_all(path)
    one_line(err, path)
    # an object header in front of a float array's pickle: its dtype is refused
    path = save_with_protocol(tmp_path / "float-pickle.npy", np.array([1.0, 2.0]), 4)
    with pytest.raises(BlockRecordsError, match=r"REDUCE of numpy.dtype with arguments \('f8'"):
        read_all(path)


def test_refuses_truncated_files(tmp_path):
    source = tmp_path / "whole.npy"
    np.save(source, np.array([b"a" * 100, b"b" * 70_000, b"c"], dtype=object))
    data = source.read_bytes()
    for cut in (4, 9, 60, 128, 140, 400, 70_000, len(data) - 1):
        path = tmp_path / f"cut{cut}.npy"
        path.write_bytes(data[:cut])
        with pytest.raises(BlockRecordsError, match="ends|truncated") as err:
            read_all(path)
        one_line(err, path)


def test_refuses_trailing_bytes(tmp_path):
    path = tmp_path / "trailing.npy"
    np.save(path, np.array([b"a", b"b"], dtype=object))
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + b"garbage")
    with pytest.raises(BlockRecordsError, match=f"byte {size}: 7 bytes after the end of the pickle") as err:
        read_all(path)
    one_line(err, path)


def test_refuses_a_wrong_magic(tmp_path):
    path = tmp_path / "magic.npy"
    path.write_bytes(b"\x93NUMPX\x01\x00" + npy_header((1,))[8:] + pickle.dumps(np.array([b"a"], dtype=object)))
    with pytest.raises(BlockRecordsError, match="byte 0: not a .npy file") as err:
        read_all(path)
    one_line(err, path)
    with pytest.raises(BlockRecordsError, match="not a .npy file"):
        count_block_records(path)


def test_refuses_a_memo_fetch_of_something_that_is_not_a_record(tmp_path):
    """Protocol 2 writes a record as _codecs.encode(text, 'latin1'): a fetch of that text (not a record) is refused."""
    x = fresh(b"abc")
    data = bytearray(npy_header((2,)) + pickle.dumps(np.array([x, x], dtype=object), protocol=2))
    ops = list(pickletools.genops(bytes(data[128:])))
    binget_pos = [pos for op, _, pos in ops if op.name == "BINGET"][-1]
    text_put = next(put for (op, text, _), (nxt, put, _) in zip(ops, ops[1:]) if op.name == "BINUNICODE"
                    and text == "abc" and nxt.name == "BINPUT")
    data[128 + binget_pos + 1] = text_put  # the last BINGET (the second record) now fetches the text
    path = tmp_path / "fetch.npy"
    path.write_bytes(bytes(data))
    with pytest.raises(BlockRecordsError, match=f"byte {128 + binget_pos}: a memo fetch of entry {text_put}") as err:
        read_all(path)
    one_line(err, path)


# ------------------------------------------------------------------------------------------------------ memory
def peak_while_reading(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(len(batch) for batch in iter_block_records(path, batch_size=1_000))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_number_of_records(tmp_path):
    peaks = {}
    for n in (50_000, 200_000):
        path = tmp_path / f"{n}.npy"
        write_block_records(path, (b"block %07d of the corpus" % i for i in range(n)), n)
        count, peaks[n] = peak_while_reading(path)
        assert count == n
    assert peaks[200_000] < 2_000_000, peaks
    assert peaks[200_000] < peaks[50_000] * 1.25 + 50_000, peaks


# ------------------------------------------------------------------------------------------------------ writing
@pytest.mark.parametrize("n", [0, 1, 2, 999, 1000, 1001, 2500])
def test_writer_is_byte_identical_to_np_save(tmp_path, n):
    records = varied_records(n)
    expected, written = tmp_path / "np_save.npy", tmp_path / "written.npy"
    np.save(expected, np.array(records, dtype=object) if n else np.empty(0, dtype=object))
    write_block_records(written, iter(records), n)
    assert written.read_bytes() == expected.read_bytes()
    assert read_all(written) == [r.decode("utf-8", errors="replace") for r in records]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_writer_protocol_3_is_what_numpy_1_wrote(tmp_path):
    records = varied_records(2_100, seed=1)
    expected = save_with_protocol(tmp_path / "p3.npy", np.array(records, dtype=object), 3)
    write_block_records(tmp_path / "written.npy", records, len(records), protocol=3)
    assert (tmp_path / "written.npy").read_bytes() == expected.read_bytes()


def test_writer_shares_what_cpython_shares(tmp_path):
    """b'' and one-byte records are shared objects: np.save writes them once, then memo fetches (also of the b'b'
    that NumPy's own reduction holds)."""
    records = [b"", b"b", b"", b"\x00", b"b", b"\x00", fresh(b"ab")]
    expected, written = tmp_path / "np_save.npy", tmp_path / "written.npy"
    np.save(expected, np.array(records, dtype=object))
    write_block_records(written, records, len(records))
    assert written.read_bytes() == expected.read_bytes()


def test_writer_takes_text_and_checks_the_count(tmp_path):
    path = tmp_path / "text.npy"
    write_block_records(path, ["é", "b"], 2)
    assert read_all(path) == ["é", "b"]
    for given, announced in ((["a"], 2), (["a", "b", "c"], 2)):
        with pytest.raises(ValueError, match="records given, num_records is 2"):
            write_block_records(tmp_path / "bad.npy", given, announced)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["text.npy"]
    with pytest.raises(TypeError, match="must be bytes or str"):
        write_block_records(tmp_path / "bad.npy", [1], 1)


# ------------------------------------------------------------------------------------------------------ TFRecord
def tfrecord(records: list[bytes]) -> bytes:
    out = bytearray()
    for data in records:
        length = struct.pack("<Q", len(data))
        out += length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))
    return bytes(out)


def test_crc32c_known_values():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4


def test_tfrecord_round_trip_and_refusals(tmp_path):
    records = [f"block {i}, caf\u00e9".encode() for i in range(25)] + [b"", b"\xff"]
    path = tmp_path / "blocks.tfr"
    path.write_bytes(tfrecord(records))
    batches = list(iter_tfrecord_blocks(path, batch_size=10))
    assert [len(b) for b in batches] == [10, 10, 7]
    assert [t for b in batches for t in b] == [r.decode("utf-8", errors="replace") for r in records]

    data = tfrecord(records[:3])
    second = 16 + len(records[0])
    bad_data = bytearray(data)
    bad_data[second + 12] ^= 1
    bad_length = bytearray(data)
    bad_length[second + 8] ^= 1
    for name, content, expected in (
        ("data", bad_data, f"byte {second}: the CRC-32C of the record data"),
        ("length", bad_length, f"byte {second}: the CRC-32C of the record length"),
        ("cut", data[:-3], f"byte {2 * second}: a record of"),
        ("header", data[: second + 5], f"byte {second}: the file ends inside a record header"),
    ):
        path = tmp_path / f"{name}.tfr"
        path.write_bytes(bytes(content))
        with pytest.raises(BlockRecordsError, match=expected) as err:
            list(iter_tfrecord_blocks(path))
        assert "\n" not in str(err.value) and str(path) in str(err.value)
    path = tmp_path / "data.tfr"
    assert len([t for b in iter_tfrecord_blocks(path, check_crc=False) for t in b]) == 3
