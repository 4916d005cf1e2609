"""A retriever and its tokenizer from whatever holds one: a saved REALM model, a pre-training output, or a BERT."""

from __future__ import annotations

import os

from transformers import AutoTokenizer

from ..modeling.initial_weights import SENTENCE_EMBEDDING_SCALE, resolve_bert_path
from ..modeling import RealmForOpenQA, RealmRetriever
from ..utils.files import MODEL_FILE_HINT, read_json_file

__all__ = ["load_retriever"]


def load_retriever(name_or_path: str) -> tuple[RealmRetriever, object]:
    """A retriever and its tokenizer from a RealmRetriever / RealmForOpenQA directory, a pre-training output
    directory (its `retriever/`), or any BERT ('minilm').

    A plain BERT (such as the packaged all-MiniLM-L6-v2) is used as a sentence embedder: mean pooling, no
    projection, normalized, relevance = 20 · cosine (`modeling.initial_weights.SENTENCE_EMBEDDING_SCALE`): the
    geometry and the softmax it was trained with; REALM training then learns its own.
    """
    path = resolve_bert_path(name_or_path)
    model_type = _model_type(path)
    pretrained_retriever = os.path.join(path, "retriever")
    if model_type not in ("realm_retriever", "realm_open_qa") and _model_type(pretrained_retriever) == "realm_retriever":
        # a pre-training output (`<output_dir>/final`): its top-level config.json is the encoder's
        path, model_type = pretrained_retriever, "realm_retriever"
    if model_type == "realm_retriever":
        retriever = RealmRetriever.from_pretrained(path)
    elif model_type == "realm_open_qa":
        retriever = RealmForOpenQA.from_pretrained(path).retriever
    else:
        retriever = RealmRetriever.from_bert(
            path, projection_size=None, pooling="mean", normalize_embeddings=True,
            similarity_scale=SENTENCE_EMBEDDING_SCALE,
        )
    tokenizer_path = path if os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(
        os.path.join(path, "vocab.txt")
    ) else resolve_bert_path("minilm")
    return retriever.eval(), AutoTokenizer.from_pretrained(tokenizer_path)


def _model_type(directory: str) -> str | None:
    """The `model_type` of `directory/config.json` (None without one)."""
    config_file = os.path.join(directory, "config.json")
    if not os.path.isfile(config_file):
        return None
    return read_json_file(config_file, MODEL_FILE_HINT).get("model_type")
