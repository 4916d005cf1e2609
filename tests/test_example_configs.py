"""Every config in examples/configs parses into its job's arguments (a misspelt key fails here, not hours into a run)."""

import glob
import os

import pytest

from realm_hf.training.arguments import CorpusArguments, LoopArguments, ModelArguments, parse_arguments
from realm_hf.training.entry_points import ICT_ARGUMENTS, PRETRAIN_ARGUMENTS
from realm_hf.training.openqa import OpenQaArguments

FINETUNE_ARGUMENTS = (LoopArguments, ModelArguments, CorpusArguments, OpenQaArguments)

CONFIGS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "examples", "configs", "*.yaml")))


def job_arguments(path: str) -> tuple[type, ...]:
    name = os.path.basename(path)
    if name.startswith("ict-"):
        return ICT_ARGUMENTS
    if name.startswith("openqa-"):
        return FINETUNE_ARGUMENTS
    return PRETRAIN_ARGUMENTS


def test_there_are_configs():
    assert len(CONFIGS) >= 7


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_example_config_parses(path):
    parsed = parse_arguments(job_arguments(path), ["--config", path])
    loop = parsed[0]
    assert loop.output_dir.startswith("outputs/") and loop.max_steps > 0
