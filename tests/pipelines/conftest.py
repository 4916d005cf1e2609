"""Saved tiny REALM directories shared by the pipeline tests (built once per session)."""

from __future__ import annotations

import pytest
from realm_pipeline_helpers import make_open_qa_dir, make_pretraining_dir


@pytest.fixture(scope="session")
def open_qa_dir(tmp_path_factory) -> str:
    return make_open_qa_dir(str(tmp_path_factory.mktemp("open_qa_model")))


@pytest.fixture(scope="session")
def pretraining_dir(tmp_path_factory) -> str:
    return make_pretraining_dir(str(tmp_path_factory.mktemp("pretraining_output")))
