import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "REALM_HF_CACHE" not in os.environ:
    # this test session's own index key (realm_hf.index.provenance), never the user's; subprocesses inherit it
    os.environ["REALM_HF_CACHE"] = tempfile.mkdtemp(prefix="realm-hf-test-cache-")
    atexit.register(shutil.rmtree, os.environ["REALM_HF_CACHE"], True)

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


@pytest.fixture(scope="session")
def qa_data_files(tmp_path_factory) -> dict[str, str]:
    """Synthetic articles, questions and the tiny fine-tuning config (tests/training_outputs.py)."""
    from training_outputs import write_qa_data

    return write_qa_data(tmp_path_factory.mktemp("qa_data"))


@pytest.fixture(scope="session")
def pretrain_output(tmp_path_factory):
    """`<out>/final` of a 2-step `realm-hf pretrain` of examples/configs/cpu-tiny.yaml."""
    pytest.importorskip("spacy")
    pytest.importorskip("faiss")
    from training_outputs import make_pretrain_output

    return make_pretrain_output(tmp_path_factory.mktemp("pretrain_output") / "run")


@pytest.fixture(scope="session")
def ict_output(tmp_path_factory):
    """`<out>/final` of a 2-step `realm-hf ict` of examples/configs/ict-cpu-tiny.yaml."""
    from training_outputs import make_ict_output

    return make_ict_output(tmp_path_factory.mktemp("ict_output") / "run")


@pytest.fixture(scope="session")
def finetune_output(tmp_path_factory, qa_data_files):
    """`<out>/final` of a 2-step `realm-hf finetune` on the synthetic questions."""
    from training_outputs import make_finetune_output

    return make_finetune_output(tmp_path_factory.mktemp("finetune_output") / "run", qa_data_files)


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
