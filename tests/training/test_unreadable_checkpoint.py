"""A damaged checkpoint is named when a run resumes from it, with the way out (an earlier checkpoint)."""

from __future__ import annotations

import re

import pytest
from fault_helpers import TinyRegressionLoop, loop_arguments

from realm_hf.utils.files import UnreadableFileError


@pytest.mark.parametrize("name", ["trainer_state.json", "model.safetensors"])
def test_resume_from_a_damaged_checkpoint_names_the_file(tmp_path, name):
    TinyRegressionLoop(loop_arguments(tmp_path, max_steps=2, save_steps=2)).train()
    path = tmp_path / "checkpoint-2" / name
    path.write_bytes(path.read_bytes()[:20])
    resumed = TinyRegressionLoop(loop_arguments(tmp_path, max_steps=4, save_steps=2, resume="latest"))
    with pytest.raises(UnreadableFileError, match="^" + re.escape(f"{path} cannot be read (")) as error:
        resumed.train()
    assert "resume from an earlier one (--resume_from_checkpoint" in str(error.value)
