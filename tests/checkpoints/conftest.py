"""A saved tiny pre-training output shared by the checkpoint-parts tests (built once per session)."""

from __future__ import annotations

import pytest
from realm_pipeline_helpers import make_pretraining_dir


@pytest.fixture(scope="session")
def pretraining_dir(tmp_path_factory) -> str:
    return make_pretraining_dir(str(tmp_path_factory.mktemp("pretraining_output")))
