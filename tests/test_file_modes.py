"""Files a team can share: every folder and file realm_hf writes honours the umask (0o777 / 0o666 & ~umask), though
tempfile.mkdtemp makes 0o700 folders, mkstemp 0o600 files and safetensors >= 0.8 writes 0o600 weights."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from realm_hf.index.atomic import atomic_directory, write_json_atomic
from realm_hf.utils.permissions import current_umask, honour_umask

REPO = Path(__file__).resolve().parents[1]
MODES = {0o022: (0o755, 0o644), 0o077: (0o700, 0o600)}


@pytest.fixture(params=sorted(MODES), ids=lambda mask: f"umask-{mask:03o}")
def umask(request) -> int:
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def tree_modes(root: Path) -> dict[str, int]:
    """Relative path -> permission bits of `root` and everything under it (links not followed)."""
    modes = {".": stat.S_IMODE(os.lstat(root).st_mode)}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder, name)
            modes[str(path.relative_to(root))] = stat.S_IMODE(os.lstat(path).st_mode)
    return modes


def assert_shared_as_the_umask_says(root: Path, umask: int) -> None:
    folder_mode, file_mode = MODES[umask]
    wrong = {
        name: oct(mode) for name, mode in tree_modes(root).items()
        if mode != (folder_mode if (root / name).is_dir() else file_mode)
    }
    assert wrong == {}, f"under umask {umask:03o}, folders should be {folder_mode:o} and files {file_mode:o}"


def test_the_umask_is_read_without_being_changed(umask):
    assert current_umask() == umask
    assert os.umask(umask) == umask  # still what the fixture set


def test_atomic_helpers_honour_the_umask(tmp_path, umask):
    from safetensors.numpy import save_file

    with atomic_directory(tmp_path / "out") as tmp:
        write_json_atomic(os.path.join(tmp, "state.json"), {"step": 1})  # mkstemp inside
        os.makedirs(os.path.join(tmp, "sub"))
        save_file({"x": np.zeros(2, np.float32)}, os.path.join(tmp, "sub", "weights.safetensors"))  # 0o600 itself
    write_json_atomic(tmp_path / "out" / "later.json", [])
    assert_shared_as_the_umask_says(tmp_path / "out", umask)


def test_a_hard_linked_file_keeps_the_mode_of_the_folder_it_is_shared_with(tmp_path):
    source = tmp_path / "corpus.arrow"
    source.write_bytes(b"blocks")
    os.chmod(source, 0o640)  # the corpus owner's choice
    (tmp_path / "index").mkdir()
    os.link(source, tmp_path / "index" / "corpus.arrow")
    honour_umask(tmp_path / "index")
    assert stat.S_IMODE(os.stat(source).st_mode) == 0o640


def test_an_index_save_honours_the_umask(tmp_path, umask):
    pytest.importorskip("faiss")
    import datasets

    from realm_hf.index import RealmIndex

    blocks = datasets.Dataset.from_dict({"block_id": [0, 1, 2], "input_ids": [[1, 5, 2]] * 3})
    vectors = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    RealmIndex.from_embeddings(blocks, vectors, index_type="Flat").save_pretrained(tmp_path / "index")
    assert (tmp_path / "index" / "index.faiss").is_file()
    assert_shared_as_the_umask_says(tmp_path / "index", umask)


def test_realm_hf_convert_honours_the_umask(tmp_path, umask, restore_logging):
    pytest.importorskip("faiss")
    from realm_hf.cli import main

    source = REPO / "tests" / "fixtures" / "old_realm" / "openqa"
    assert main(["convert", "--src", str(source), "--output", str(tmp_path / "converted")]) == 0
    assert {"model.safetensors", "index"} <= set(os.listdir(tmp_path / "converted"))
    assert_shared_as_the_umask_says(tmp_path / "converted", umask)
