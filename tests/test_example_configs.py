"""Every config in examples/configs parses into its job's arguments (a misspelt key fails here, not hours into a run)."""

import glob
import os

import pytest

from realm_hf.training.argument_parsing import parse_arguments
from realm_hf.training.arguments import CorpusArguments, LoopArguments, ModelArguments
from realm_hf.training.entry_points import ICT_ARGUMENTS, MLM_ARGUMENTS, PRETRAIN_ARGUMENTS
from realm_hf.training.openqa import OpenQaArguments

FINETUNE_ARGUMENTS = (LoopArguments, ModelArguments, CorpusArguments, OpenQaArguments)

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "examples", "configs")
ACCELERATE_CONFIGS = sorted(glob.glob(os.path.join(CONFIG_DIR, "accelerate-*.yaml")))
CONFIGS = sorted(set(glob.glob(os.path.join(CONFIG_DIR, "*.yaml"))) - set(ACCELERATE_CONFIGS))


def job_arguments(path: str) -> tuple[type, ...]:
    name = os.path.basename(path)
    if name.startswith("ict-") or name.endswith("-ict.yaml"):
        return ICT_ARGUMENTS
    if name.startswith("mlm-") or name.endswith("-mlm.yaml"):
        return MLM_ARGUMENTS
    if name.startswith("openqa-") or name.endswith("-openqa.yaml"):
        return FINETUNE_ARGUMENTS
    return PRETRAIN_ARGUMENTS


def test_there_are_configs():
    assert len(CONFIGS) >= 7


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_example_config_parses(path):
    parsed = parse_arguments(job_arguments(path), ["--config", path])
    loop = parsed[0]
    assert loop.output_dir.startswith("outputs/") and loop.max_steps > 0


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=os.path.basename)
def test_accelerate_config_is_one_accelerate_reads(path):
    """The accelerate configs of examples/wiki/run.sh load as accelerate's own cluster config (a misspelt key or a
    wrong type fails here), and a DeepSpeed one names a DeepSpeed file that exists."""
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(path)
    assert config.num_processes >= 1
    if config.deepspeed_config:
        assert os.path.isfile(os.path.join(CONFIG_DIR, "..", "..", config.deepspeed_config["deepspeed_config_file"]))


def test_accelerate_configs_cover_one_gpu_ddp_zero2_and_zero3():
    names = {os.path.basename(path) for path in ACCELERATE_CONFIGS}
    assert {"accelerate-1gpu.yaml", "accelerate-ddp.yaml", "accelerate-zero2.yaml", "accelerate-zero3.yaml"} <= names
