"""`final/` appears whole or not at all: the loop writes it into a hidden temporary sibling renamed into place, so a
save that fails half-way leaves no half model where users and `realm-hf publish` look (a previous `final/` stays as
it was), and no temporary folder that looks like a model. What the loop writes honours the umask."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from fault_helpers import TinyRegressionLoop, loop_arguments
from safetensors.numpy import save_file

from realm_hf.training.loop import FINAL_NAME


class SavingLoop(TinyRegressionLoop):
    """Saves `model.safetensors` then `config.json`; `fail_after_weights` raises between the two."""

    fail_after_weights = False

    def save_model(self, directory: str) -> None:
        save_file({"weight": np.full(4, self.step, np.float32)}, os.path.join(directory, "model.safetensors"))
        if self.fail_after_weights:
            raise OSError("disk full (simulated)")
        with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"step": self.step, "named": self.published_path(os.path.join(directory, "index"))}, f)


def _hidden(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


def test_a_save_that_fails_half_way_leaves_no_final_folder(tmp_path):
    loop = SavingLoop(loop_arguments(tmp_path, max_steps=2, save_steps=0))
    loop.fail_after_weights = True
    with pytest.raises(OSError, match="disk full"):
        loop.train()
    assert not os.path.exists(tmp_path / FINAL_NAME) and _hidden(tmp_path) == []


def test_a_failed_save_keeps_the_previous_final_folder_whole(tmp_path):
    loop = SavingLoop(loop_arguments(tmp_path, max_steps=2, save_steps=0))
    loop.train()
    final = tmp_path / FINAL_NAME
    config = json.loads((final / "config.json").read_text())
    assert config == {"step": 2, "named": str(final / "index")}  # messages name the folder it becomes, not the temp
    before = {name: (final / name).read_bytes() for name in os.listdir(final)}
    loop.step, loop.fail_after_weights = 3, True
    with pytest.raises(OSError, match="disk full"):
        loop.save_final(str(final))
    assert {name: (final / name).read_bytes() for name in os.listdir(final)} == before
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize("umask, folder_mode, file_mode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_checkpoints_and_the_final_model_honour_the_umask(tmp_path, umask, folder_mode, file_mode):
    previous = os.umask(umask)
    try:
        SavingLoop(loop_arguments(tmp_path / "run", max_steps=2, save_steps=2)).train()
    finally:
        os.umask(previous)
    run, seen = tmp_path / "run", set()
    for root, folders, files in os.walk(run):  # the whole output folder: checkpoint, final/, trainer state, history
        assert stat.S_IMODE(os.stat(root).st_mode) == folder_mode, root
        for file in files:
            assert stat.S_IMODE(os.stat(os.path.join(root, file)).st_mode) == file_mode, (file, umask)
            seen.add(os.path.relpath(os.path.join(root, file), run))
    # accelerate's weights (0o600 by themselves) and the loop's own files
    assert {"checkpoint-2/model.safetensors", "final/model.safetensors", "trainer_state.json"} <= seen
