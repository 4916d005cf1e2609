import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

TINY_BERT = {
    "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


@pytest.fixture
def tiny_bert() -> dict:
    return dict(TINY_BERT)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def restore_logging(monkeypatch):
    """For tests that run a script's `main()` in this process: the logging it configures (root handlers and level,
    library loggers' levels) and the environment it sets (TQDM_DISABLE, HF_HUB_OFFLINE) are put back afterwards, so
    the tests after it still see realm_hf's log lines and progress bars."""
    import logging

    names = ("realm_hf", "accelerate", "datasets", "transformers", "bench_gpu_step", "bench_step_overhead")
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in names}
    # recorded by monkeypatch, so that what main() sets with os.environ.setdefault is undone at teardown
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "1"))
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(root_level)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
