"""Tiny REALM models, a tiny index and their saved directories, for the pipeline and `realm-hf ask` tests.

The vocabulary is the real uncased one of the packaged all-MiniLM-L6-v2 (read from the installed package's folder
without importing it); the BERTs are random (hidden 32, 2 layers), so answers are arbitrary but deterministic.
"""

from __future__ import annotations

import os

import pytest
import torch
from openqa_helpers import TINY

ARTICLES = [
    {"id": "a0", "title": "Paris", "text": "Paris is the capital of France. The Eiffel Tower was completed in 1889."},
    {"id": "a1", "title": "Berlin", "text": "Berlin is the capital of Germany. The Berlin Wall fell in 1989."},
    {"id": "a2", "title": "Albert Einstein", "text": "Albert Einstein developed the theory of general relativity."},
    {"id": "a3", "title": "Jupiter", "text": "Jupiter is the largest planet in the Solar System."},
    {"id": "a4", "title": "Nile", "text": "The Nile flows through Cairo, the capital of Egypt, into the sea."},
    {"id": "a5", "title": "Brazil", "text": "Portuguese is the official language of Brazil. Its capital is Brasília."},
    {"id": "a6", "title": "Pierre de Fermat", "text": "A Fermat prime is a prime of the form 2^(2^n) + 1, like 257."},
    {"id": "a7", "title": "Mount Everest", "text": "Mount Everest, at 8,849 metres, is Earth's highest mountain."},
    {"id": "a8", "title": "Python", "text": "Python is a programming language created by Guido van Rossum."},
    {"id": "a9", "title": "Moon", "text": "Neil Armstrong was the first person to walk on the Moon, in July 1969."},
]

# a wide init spreads the random models' distributions, so rankings are not near-ties
BERT = dict(TINY, initializer_range=0.5)
QUERY_MAX_LENGTH = 24
BLOCK_MAX_LENGTH = 48
JOINED_MAX_LENGTH = 80


def minilm_tokenizer():
    from transformers import AutoTokenizer

    from openqa_helpers import minilm_tokenizer_dir

    return AutoTokenizer.from_pretrained(minilm_tokenizer_dir())


def _single_threaded_faiss() -> None:
    try:
        import faiss
    except ImportError:
        return
    faiss.omp_set_num_threads(1)


def _retriever_config(tokenizer) -> dict:
    return {
        "bert_config": dict(BERT, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id),
        "projection_size": 16,
        "query_max_length": QUERY_MAX_LENGTH,
        "block_max_length": BLOCK_MAX_LENGTH,
    }


def build_index(retriever, tokenizer):
    from realm_hf.corpus import split_into_blocks
    from realm_hf.index import RealmIndex

    _single_threaded_faiss()
    blocks = split_into_blocks(ARTICLES, tokenizer, max_length=BLOCK_MAX_LENGTH)
    return RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type="Flat", batch_size=16)


def make_open_qa_dir(directory: str, seed: int = 0) -> str:
    """A saved RealmForOpenQA with its tokenizer and its index in `<dir>/index` (config.index_repo_id = "index")."""
    from realm_hf import RealmForOpenQA, RealmForOpenQAConfig

    tokenizer = minilm_tokenizer()
    torch.manual_seed(seed)
    config = RealmForOpenQAConfig(
        retriever_config=_retriever_config(tokenizer),
        reader_config={
            "bert_config": dict(BERT, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id),
            "span_hidden_size": 16,
            "max_span_width": 5,
            "max_length": JOINED_MAX_LENGTH,
        },
        top_k=3,
        index_repo_id="index",
    )
    model = RealmForOpenQA(config).eval()
    index = build_index(model.retriever, tokenizer)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    index.save_pretrained(os.path.join(directory, "index"))
    return directory


def make_pretraining_dir(directory: str, seed: int = 0) -> str:
    """What `RealmPretrainer.save_model` writes: `retriever/`, `encoder/` (each with the tokenizer), `index/`, and at
    the top level the encoder's config and the tokenizer (what `transformers.pipeline(task, model=<dir>)` reads)."""
    from realm_hf import RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig, RealmRetriever, RealmRetrieverConfig

    tokenizer = minilm_tokenizer()
    torch.manual_seed(seed)
    retriever = RealmRetriever(RealmRetrieverConfig(**_retriever_config(tokenizer))).eval()
    encoder = RealmKnowledgeEncoder(
        RealmKnowledgeEncoderConfig(
            bert_config=dict(BERT, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id),
            num_candidates=4,
            max_length=JOINED_MAX_LENGTH,
            mask_token_id=tokenizer.mask_token_id,
        )
    ).eval()
    index = build_index(retriever, tokenizer)
    retriever.save_pretrained(os.path.join(directory, "retriever"))
    encoder.save_pretrained(os.path.join(directory, "encoder"))
    tokenizer.save_pretrained(os.path.join(directory, "retriever"))
    tokenizer.save_pretrained(os.path.join(directory, "encoder"))
    encoder.config.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    index.save_pretrained(os.path.join(directory, "index"))
    return directory
