"""What the trainers start from: the models (saved REALM models, a BERT checkpoint, or tiny random configs for tests)
and their tokenizer."""

from __future__ import annotations

import dataclasses
import logging
import os

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from ..configuration import (
    RealmForOpenQAConfig, RealmKnowledgeEncoderConfig, RealmReaderConfig, RealmRetrieverConfig,
)
from ..checkpoints.folders import is_pretraining_checkpoint
from ..modeling.initial_weights import resolve_bert_path
from ..modeling import RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever
from ..modeling.retriever import load_bert_weights
from ..utils.files import MODEL_FILE_HINT, read_json_file
from ..utils.options import UsageError
from .arguments import CorpusArguments, ModelArguments, OpenQaArguments

logger = logging.getLogger(__name__)

__all__ = [
    "TINY_BERT",
    "fit_lengths_to_models",
    "length_limits",
    "is_realm_dir",
    "load_models",
    "load_open_qa_model",
    "load_open_qa_tokenizer",
    "open_qa_tokenizer_path",
    "pretraining_tokenizer_path",
    "untie_retriever_towers",
]

TINY_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
"""The BERT of `ModelArguments.random_init` (tests, smoke runs)."""


def is_realm_dir(path: str, model_type: str) -> bool:
    """Whether `path` holds a saved realm_hf model of `model_type` (`realm_retriever`, `realm_open_qa`...)."""
    config = os.path.join(path, "config.json")
    if not os.path.isfile(config):
        return False
    return read_json_file(config, MODEL_FILE_HINT).get("model_type") == model_type


def _tiny_bert(vocab_size: int, corpus_args: CorpusArguments) -> dict:
    return dict(TINY_BERT, vocab_size=vocab_size, max_position_embeddings=max(512, corpus_args.block_length))


def _retriever_options(model_args: ModelArguments, corpus_args: CorpusArguments, **extra) -> dict:
    """The retriever's config values from the arguments (a retriever built from BERT or at random)."""
    return {
        "projection_size": model_args.projection_size or None, "pooling": model_args.pooling,
        "share_towers": model_args.share_towers, **extra, "query_max_length": corpus_args.query_max_length,
        "block_max_length": corpus_args.block_length,
    }


def fit_lengths_to_models(corpus_args: CorpusArguments, limits: dict[str, tuple[int, str]]) -> None:
    r"""
    Fit the run's lengths to the models it starts from (a converted `google/realm-*` checkpoint, a saved realm_hf
    model), in place: a length left at its default that is longer than its model takes is lowered to the model's
    (logged), one asked for (command line, config file) is refused. A `query_max_length` left at its default that
    leaves no room for a block in `joined_max_length` (when that is limited here) is lowered to half of it.

    Args:
        corpus_args ([`CorpusArguments`]): The run's lengths (`block_length`, `query_max_length`, `joined_max_length`).
        limits (`dict[str, tuple[int, str]]`): Field name -> (the most its model takes, what says so, e.g.
            `"block_max_length of the retriever at models/embedder"`).

    Raises:
        [`UsageError`]: one line naming the option, the model's limit and a value that works.
    """
    defaults = {field.name: field.default for field in dataclasses.fields(CorpusArguments)}
    given = {name: getattr(corpus_args, name) != defaults[name] for name in limits}
    for name, (limit, owner) in limits.items():
        value = getattr(corpus_args, name)
        if value <= limit:
            continue
        if given[name]:
            raise UsageError(
                f"--{name} {value} is longer than the model takes: {owner} is {limit} wordpieces; pass --{name} "
                f"{limit} or less."
            )
        logger.info("%s %d lowered to %d: %s is %d", name, value, limit, owner, limit)
        setattr(corpus_args, name, limit)
    if "joined_max_length" not in limits:
        return
    joined, query = corpus_args.joined_max_length, corpus_args.query_max_length
    if query + 1 >= joined and not given.get("query_max_length", False):  # e.g. both lowered to a model's 64
        logger.info("query_max_length %d lowered to %d: half of joined_max_length=%d", query, joined // 2, joined)
        corpus_args.query_max_length = query = joined // 2
    if query + 1 >= joined:  # [CLS] x [SEP] z_body [SEP]: no wordpiece of the block would fit
        raise UsageError(
            f"--query_max_length {query} leaves no room for a block in joined_max_length={joined} wordpieces "
            f"([CLS] x [SEP] z_body [SEP]); pass a shorter --query_max_length, e.g. {joined // 2}."
        )


def length_limits(
    retriever: RealmRetriever, retriever_source: str, reader=None, reader_source: str | None = None
) -> dict[str, tuple[int, str]]:
    """The `limits` of [`fit_lengths_to_models`] from the retriever's config and, when given, that of the model that
    reads the joined sequences (a `RealmKnowledgeEncoder` or a `RealmReader`: its `max_length`)."""
    limits = {
        "block_length": (retriever.config.block_max_length, f"block_max_length of the retriever ({retriever_source})"),
        "query_max_length": (retriever.config.query_max_length, f"query_max_length of the retriever ({retriever_source})"),
    }
    if reader is not None:
        limits["joined_max_length"] = (reader.config.max_length, f"max_length of {reader_source}")
    return limits


# ------------------------------------------------------------------------------------------- pre-training
def load_models(
    model_args: ModelArguments, corpus_args: CorpusArguments, vocab_size: int, mask_token_id: int,
    ict_warm_start: str | None = None, null_document_score: str | None = None,
):
    r"""
    The retriever and the encoder from saved REALM models, a BERT checkpoint, or tiny random configs; the retriever
    of `ict_warm_start` (an ICT output) instead, when given. The lengths of `corpus_args` are then fitted to them
    ([`fit_lengths_to_models`]): a start converted from `google/realm-*` may take shorter inputs than the defaults.
    `null_document_score`, when given, replaces the retriever's (`RealmRetrieverConfig.null_document_score`).
    """
    overrides = {"null_document_score": null_document_score} if null_document_score is not None else {}
    if model_args.random_init:
        bert = _tiny_bert(vocab_size, corpus_args)
        retriever = RealmRetriever(
            RealmRetrieverConfig(bert_config=bert, **_retriever_options(model_args, corpus_args, **overrides))
        )
        encoder = RealmKnowledgeEncoder(
            RealmKnowledgeEncoderConfig(bert_config=bert, max_length=corpus_args.joined_max_length, mask_token_id=mask_token_id)
        )
    else:
        retriever_path = resolve_bert_path(model_args.retriever)
        if ict_warm_start or is_realm_dir(retriever_path, "realm_retriever"):
            retriever = RealmRetriever.from_pretrained(ict_warm_start or retriever_path, **overrides)
        else:
            retriever = RealmRetriever.from_bert(retriever_path, **_retriever_options(model_args, corpus_args, **overrides))
        encoder_path = resolve_bert_path(model_args.encoder)
        if is_realm_dir(encoder_path, "realm_knowledge_encoder"):
            encoder = RealmKnowledgeEncoder.from_pretrained(encoder_path)
        else:
            encoder = RealmKnowledgeEncoder.from_bert(
                encoder_path, max_length=corpus_args.joined_max_length, mask_token_id=mask_token_id
            )
    if model_args.random_init and ict_warm_start:
        retriever = RealmRetriever.from_pretrained(ict_warm_start, **overrides)
    limits = length_limits(retriever, ict_warm_start or model_args.retriever, encoder, f"the encoder ({model_args.encoder})")
    fit_lengths_to_models(corpus_args, limits)
    return retriever, encoder


def pretraining_tokenizer_path(model_args: ModelArguments) -> str:
    """The encoder's tokenizer (the packaged MiniLM's for random models, or a saved encoder without one)."""
    tokenizer_path = resolve_bert_path(model_args.encoder if not model_args.random_init else "minilm")
    if is_realm_dir(tokenizer_path, "realm_knowledge_encoder") and not os.path.isfile(
        os.path.join(tokenizer_path, "tokenizer.json")
    ):
        tokenizer_path = resolve_bert_path("minilm")
    return tokenizer_path


# ----------------------------------------------------------------------------------------------- open-QA
def _has_tokenizer(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, name)) for name in ("tokenizer.json", "vocab.txt"))


def _reader_from_encoder(encoder: RealmKnowledgeEncoder, max_length: int, span_normalization: str) -> RealmReader:
    """A reader whose BERT is the pre-trained knowledge-augmented encoder's (the MLM head is dropped)."""
    reader = RealmReader(
        RealmReaderConfig(
            bert_config=encoder.config.bert_config.to_dict(), max_length=min(max_length, encoder.config.max_length),
            span_normalization=span_normalization,
        )
    )
    load_bert_weights(reader.bert, encoder.bert)
    return reader


def _open_qa_retriever_options(
    model_args: ModelArguments, corpus_args: CorpusArguments, openqa_args: OpenQaArguments
) -> dict:
    return _retriever_options(
        model_args, corpus_args, normalize_embeddings=openqa_args.normalize_embeddings,
        similarity_scale=openqa_args.similarity_scale,
    )


def _load_retriever(
    path: str, model_args: ModelArguments, corpus_args: CorpusArguments, openqa_args: OpenQaArguments
) -> RealmRetriever:
    if is_realm_dir(path, "realm_retriever"):
        return RealmRetriever.from_pretrained(path)
    if is_realm_dir(path, "realm_open_qa"):
        return RealmForOpenQA.from_pretrained(path).retriever
    return RealmRetriever.from_bert(path, **_open_qa_retriever_options(model_args, corpus_args, openqa_args))


def _load_reader(path: str, corpus_args: CorpusArguments, span_normalization: str) -> RealmReader:
    if is_realm_dir(path, "realm_knowledge_encoder"):
        return _reader_from_encoder(
            RealmKnowledgeEncoder.from_pretrained(path), corpus_args.joined_max_length, span_normalization
        )
    if is_realm_dir(path, "realm_reader"):
        return RealmReader.from_pretrained(path)
    return RealmReader.from_bert(
        path, max_length=corpus_args.joined_max_length, span_normalization=span_normalization
    )


def load_open_qa_model(
    openqa_args: OpenQaArguments, model_args: ModelArguments, corpus_args: CorpusArguments, vocab_size: int
) -> RealmForOpenQA:
    r"""
    The model to fine-tune:

    - `model_args.random_init`: tiny random retriever and reader (tests, smoke runs);
    - `openqa_args.model` a `RealmForOpenQA` directory: as saved (its `top_k` replaced by `openqa_args.top_k`);
    - `openqa_args.model` a pre-training checkpoint (an output directory or a Hub repo id): its `retriever/` and a
      reader whose BERT is its `encoder/`'s (the MLM head is dropped, the span scorer starts fresh);
    - otherwise the retriever from `openqa_args.model or model_args.retriever` (a `RealmRetriever` dir or a BERT)
      and the reader from `openqa_args.model or model_args.encoder` (a `RealmKnowledgeEncoder` / `RealmReader` dir
      or a BERT). A retriever built from BERT takes `projection_size` (0 = none), `pooling` and `share_towers`.
    """
    if model_args.random_init:
        bert = _tiny_bert(vocab_size, corpus_args)
        config = RealmForOpenQAConfig(
            retriever_config=RealmRetrieverConfig(
                bert_config=bert, **_open_qa_retriever_options(model_args, corpus_args, openqa_args)
            ).to_dict(),
            reader_config=RealmReaderConfig(
                bert_config=bert, max_length=corpus_args.joined_max_length, span_hidden_size=64,
                span_normalization=openqa_args.span_normalization,
            ).to_dict(),
            top_k=openqa_args.top_k,
        )
        return RealmForOpenQA(config)
    source = resolve_bert_path(openqa_args.model) if openqa_args.model else None
    if source is not None and is_realm_dir(source, "realm_open_qa"):
        model = RealmForOpenQA.from_pretrained(source)
        model.config.top_k = openqa_args.top_k
        return model
    if source is not None and is_pretraining_checkpoint(source):  # a local folder or a Hub repo id
        retriever = RealmRetriever.from_pretrained(source)  # from its retriever/ folder
        reader = _reader_from_encoder(
            RealmKnowledgeEncoder.from_pretrained(source), corpus_args.joined_max_length, openqa_args.span_normalization
        )
    else:
        retriever = _load_retriever(
            source or resolve_bert_path(model_args.retriever), model_args, corpus_args, openqa_args
        )
        reader = _load_reader(
            source or resolve_bert_path(model_args.encoder), corpus_args, openqa_args.span_normalization
        )
    return RealmForOpenQA.from_components(retriever, reader, top_k=openqa_args.top_k)


def untie_retriever_towers(model: RealmForOpenQA) -> RealmForOpenQA:
    r"""
    Give a shared-tower retriever two towers with the same weights: the query tower (trained) and the document
    tower (kept as is). Fine-tuning then leaves the tower that built the index untouched, so the saved model can
    still embed new blocks for its index and its fingerprint still matches the index manifest.
    """
    old = model.retriever
    if old.doc_embedder is not None:
        return model
    config = RealmRetrieverConfig.from_dict({**old.config.to_dict(), "share_towers": False})
    new = RealmRetriever(config).to(device=next(old.parameters()).device, dtype=next(old.parameters()).dtype)
    new.query_embedder.load_state_dict(old.query_embedder.state_dict())
    new.doc_embedder.load_state_dict(old.query_embedder.state_dict())
    if hasattr(old, "null_document_logit"):
        new.null_document_logit.data.copy_(old.null_document_logit.data)
    model.retriever = new
    model.config.retriever_config = config
    return model


def load_open_qa_tokenizer(openqa_args: OpenQaArguments, model_args: ModelArguments) -> PreTrainedTokenizerBase:
    """The tokenizer of the model to fine-tune: that of a pre-training checkpoint's encoder (a Hub repo id too), else
    [`open_qa_tokenizer_path`]'s."""
    source = resolve_bert_path(openqa_args.model) if openqa_args.model and not model_args.random_init else None
    if source is not None and not os.path.isdir(source) and is_pretraining_checkpoint(source):
        return AutoTokenizer.from_pretrained(source, subfolder="encoder")
    return AutoTokenizer.from_pretrained(open_qa_tokenizer_path(openqa_args, model_args))


def open_qa_tokenizer_path(openqa_args: OpenQaArguments, model_args: ModelArguments) -> str:
    """The tokenizer of the model to fine-tune: the first of its folders that has one, else the packaged MiniLM's."""
    candidates = []
    if not model_args.random_init:
        if openqa_args.model:
            source = resolve_bert_path(openqa_args.model)
            candidates += [source, os.path.join(source, "retriever"), os.path.join(source, "encoder")]
        else:
            candidates += [resolve_bert_path(model_args.retriever), resolve_bert_path(model_args.encoder)]
    for path in candidates:
        if os.path.isdir(path) and _has_tokenizer(path):
            return path
    if candidates and not os.path.isdir(candidates[0]):
        return candidates[0]  # a Hub id
    return resolve_bert_path("minilm")
