"""The converters, one per old class, and [`convert_checkpoint`], which detects the kind, converts and saves."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..configuration import RealmForOpenQAConfig, RealmKnowledgeEncoderConfig
from ..hub.conversion_facts import CONVERSION_FILE
from ..utils.permissions import honour_umask  # what `realm-hf publish` reads for the card
from ..modeling import RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever
from .checkpoint import (
    BLOCK_EMB, KIND_ALIASES, KINDS, RealmCheckpoint, RealmConversionError, as_checkpoint, detect_kind,
    load_realm_checkpoint,
)
from .configs import bert_config, clip_length, find_mask_token_id, reader_config, realm_config_value, retriever_config
from .mapping import (
    EMBEDDING_BUFFERS, add_source_aliases, embedder_drops, embedder_renames, load_mapped, reader_renames_and_drops,
    towers_are_shared,
)

logger = logging.getLogger(__name__)

__all__ = [
    "convert_checkpoint", "convert_embedder", "convert_knowledge_encoder", "convert_open_qa", "convert_reader",
    "extract_block_embeddings",
]

BLOCK_EMBEDDINGS_KEY = "embeddings"
"""The tensor name of the corpus embeddings in the safetensors file [`extract_block_embeddings`] writes."""

_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")


def convert_embedder(src: str | os.PathLike | RealmCheckpoint) -> RealmRetriever:
    r"""
    Convert an old `RealmEmbedder` or `RealmScorer` checkpoint (e.g. `google/realm-cc-news-pretrained-embedder`,
    `google/realm-cc-news-pretrained-scorer`) into a [`RealmRetriever`].

    The old embedder projects BERT's pooler output (`tanh(W h_CLS)`) with `cls.dense` and `cls.LayerNorm`, so the
    retriever uses `pooling="pooler"` and `projection_layer_norm=True`. One embedder serves queries and documents
    (`share_towers=True`), unless a `RealmScorer` checkpoint holds a `query_embedder` with weights of its own.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).

    Returns:
        [`RealmRetriever`] in eval mode.
    """
    checkpoint = as_checkpoint(src)
    state_dict = checkpoint.state_dict
    if any(name.startswith("embedder.") for name in state_dict):  # RealmScorer
        shared = towers_are_shared(state_dict)
        renames = embedder_renames("embedder.", "query_embedder." if shared else "doc_embedder.")
        drops = embedder_drops("embedder.")
        if shared:
            drops["query_embedder."] = "second name of the shared embedder in RealmScorer"
        else:
            renames += embedder_renames("query_embedder.", "query_embedder.")
            drops.update(embedder_drops("query_embedder."))
    else:  # RealmEmbedder
        shared = True
        renames, drops = embedder_renames("", "query_embedder."), embedder_drops("")
    model = RealmRetriever(retriever_config(checkpoint.config, share_towers=shared))
    load_mapped(model, state_dict, renames, drops, "RealmRetriever")
    return model


def convert_knowledge_encoder(
    src: str | os.PathLike | RealmCheckpoint, mask_token_id: int | None = None
) -> RealmKnowledgeEncoder:
    r"""
    Convert an old `RealmKnowledgeAugEncoder` checkpoint (`google/realm-cc-news-pretrained-encoder`) into a
    [`RealmKnowledgeEncoder`]: `realm.*` is the BERT, `cls.predictions.*` the MLM head (its decoder tied to the word
    embeddings, unless the checkpoint holds a different decoder matrix). The unused BERT pooler is dropped.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).
        mask_token_id (`int`, *optional*): Id of `[MASK]`; read from the checkpoint's `vocab.txt` when omitted.

    Returns:
        [`RealmKnowledgeEncoder`] in eval mode.
    """
    checkpoint = as_checkpoint(src)
    state_dict = add_source_aliases(checkpoint.state_dict, [""])
    decoder, embeddings = "cls.predictions.decoder.weight", "realm.embeddings.word_embeddings.weight"
    tied = decoder not in state_dict or (
        embeddings in state_dict
        and state_dict[decoder].shape == state_dict[embeddings].shape
        and torch.equal(state_dict[decoder], state_dict[embeddings])
    )
    num_candidates = realm_config_value(checkpoint.config, "num_candidates")
    config = RealmKnowledgeEncoderConfig(
        bert_config=bert_config(checkpoint.config),
        num_candidates=num_candidates,
        use_null_document=num_candidates >= 2,
        max_length=clip_length(288, checkpoint.config),
        mask_token_id=find_mask_token_id(checkpoint, mask_token_id),
        tie_word_embeddings=tied,
    )
    model = RealmKnowledgeEncoder(config)
    renames = [("realm.", "bert."), ("cls.predictions.", "mlm_head.predictions.")]
    drops = {"realm.pooler.": "BERT pooler of the old RealmKnowledgeAugEncoder, unused by the MLM head"}
    drops.update({buffer: "position/token-type buffer, recomputed" for buffer in EMBEDDING_BUFFERS})
    if tied and decoder in state_dict:
        drops[decoder] = "tied to the word embeddings"
    load_mapped(model, state_dict, renames, drops, "RealmKnowledgeEncoder")
    return model


def convert_reader(src: str | os.PathLike | RealmCheckpoint) -> RealmReader:
    r"""
    Convert an old `RealmReader` checkpoint into a [`RealmReader`]: `realm.*` is the BERT and
    `qa_outputs.{dense_intermediate, layer_normalization, dense_output}` the span scorer, whose LayerNorm keeps the
    old `reader_layer_norm_eps`. The old reader's unused MLM head and BERT pooler are dropped.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).

    Returns:
        [`RealmReader`] in eval mode.
    """
    checkpoint = as_checkpoint(src)
    model = RealmReader(reader_config(checkpoint.config))
    renames, drops = reader_renames_and_drops("", "")
    load_mapped(model, checkpoint.state_dict, renames, drops, "RealmReader")
    return model


def convert_open_qa(src: str | os.PathLike | RealmCheckpoint) -> RealmForOpenQA:
    r"""
    Convert an old `RealmForOpenQA` checkpoint (`google/realm-orqa-{nq,wq}-openqa`) into a [`RealmForOpenQA`]:
    `embedder.*` becomes the retriever (its query tower; one shared tower) and `reader.*` the reader.

    The old checkpoint's `block_emb` buffer (the corpus embeddings, 13,353,718 x 128 in the released models) is
    *not* part of the converted model: an index is data, never a model buffer. Get it with
    [`extract_block_embeddings`] or `convert_checkpoint(..., block_embeddings_path=...)`, and build the index from it
    together with the block texts. Those embeddings were made by the *pre-trained* document tower, not by the
    fine-tuned query tower of this checkpoint, so `embed_documents` of the converted model does not reproduce them
    and their index has no fingerprint of a tower in this model.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).

    Returns:
        [`RealmForOpenQA`] in eval mode (`top_k` = the old `reader_beam_size`, which the old model also retrieved in
        eval mode; `answer_rule="best_span"`, the old decision rule; the reader's `span_normalization="global"`).
    """
    checkpoint = as_checkpoint(src)
    config = RealmForOpenQAConfig(
        retriever_config=retriever_config(checkpoint.config).to_dict(),
        reader_config=reader_config(checkpoint.config).to_dict(),
        top_k=realm_config_value(checkpoint.config, "reader_beam_size"),  # the old eval-mode searcher beam too
        answer_rule="best_span",  # answers as the old RealmForOpenQA did (see RealmForOpenQAConfig.answer_rule)
    )
    model = RealmForOpenQA(config)
    reader_renames, reader_drops = reader_renames_and_drops("reader.", "reader.")
    renames = embedder_renames("embedder.", "retriever.query_embedder.") + reader_renames
    drops = {
        **embedder_drops("embedder."),
        **reader_drops,
        BLOCK_EMB: "corpus embeddings, data for the index (extract_block_embeddings), not weights",
    }
    load_mapped(model, checkpoint.state_dict, renames, drops, "RealmForOpenQA")
    return model


def extract_block_embeddings(
    src: str | os.PathLike | RealmCheckpoint, output_path: str | os.PathLike | None = None
) -> torch.Tensor:
    r"""
    The corpus embeddings `block_emb` `[num_blocks, D]` of an old `RealmForOpenQA` checkpoint.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory, or a checkpoint read with
            `load_realm_checkpoint(..., load_block_embeddings=True)`.
        output_path (`str` or `os.PathLike`, *optional*): Where to also write them, as a safetensors file holding
            one float32 tensor `"embeddings"` `[num_blocks, D]` (row i = block record i of the old corpus), the
            format an index directory stores.

    Returns:
        `torch.FloatTensor` of shape `(num_blocks, embedding_size)`.
    """
    if isinstance(src, RealmCheckpoint) and BLOCK_EMB not in src.state_dict and src.path is not None:
        src = src.path
    checkpoint = src if isinstance(src, RealmCheckpoint) else load_realm_checkpoint(src, load_block_embeddings=True)
    if BLOCK_EMB not in checkpoint.state_dict:
        raise RealmConversionError(
            f"{checkpoint.path or 'The checkpoint'} holds no `block_emb`: only old RealmForOpenQA checkpoints "
            "(google/realm-orqa-*) carry corpus embeddings."
        )
    embeddings = checkpoint.state_dict[BLOCK_EMB].float().contiguous()
    if output_path is not None:
        output_path = Path(output_path)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        save_file(
            {BLOCK_EMBEDDINGS_KEY: embeddings},
            str(output_path),
            metadata={
                "source": str(checkpoint.path or ""),
                "num_blocks": str(embeddings.shape[0]),
                "dim": str(embeddings.shape[1]),
            },
        )
        honour_umask(output_path)  # safetensors writes 0600
        logger.info("Wrote %d block embeddings (dim %d) to %s", embeddings.shape[0], embeddings.shape[1], output_path)
    return embeddings


_CONVERTERS = {
    "embedder": convert_embedder,
    "encoder": convert_knowledge_encoder,
    "reader": convert_reader,
    "openqa": convert_open_qa,
}


def _save_tokenizer(checkpoint: RealmCheckpoint, output_dir: Path) -> bool:
    """Re-save the old RealmTokenizer files as a `BertTokenizer` (REALM's tokenizer was BERT's wordpiece)."""
    if checkpoint.path is None or not any((checkpoint.path / name).is_file() for name in _TOKENIZER_FILES):
        return False
    from transformers import BertTokenizer

    # `tokenizer_config.json` names `RealmTokenizer`, which transformers v5 no longer has: load as BERT explicitly
    tokenizer = BertTokenizer.from_pretrained(str(checkpoint.path))
    tokenizer.save_pretrained(str(output_dir))
    return True


GOOGLE_CHECKPOINTS = (
    "realm-cc-news-pretrained-embedder", "realm-cc-news-pretrained-encoder", "realm-cc-news-pretrained-scorer",
    "realm-cc-news-pretrained-openqa", "realm-orqa-nq-openqa", "realm-orqa-nq-reader", "realm-orqa-wq-openqa",
    "realm-orqa-wq-reader",
)
"""The transformers-REALM checkpoints Google Research released under `google/` (Apache-2.0)."""


_OLD_CLASSES = {"embedder": "RealmEmbedder", "encoder": "RealmKnowledgeAugEncoder", "reader": "RealmReader",
                "openqa": "RealmForOpenQA"}


def source_repo_id(src_dir: str | os.PathLike) -> str | None:
    r"""
    The Hub id of an old checkpoint folder, when it can be told: a Hugging Face cache snapshot
    (`.../models--google--realm-orqa-nq-openqa/snapshots/<commit>`) names it, and a folder named after one of
    Google's checkpoints ([`GOOGLE_CHECKPOINTS`], e.g. an `hf download --local-dir realm-orqa-nq-openqa`) is taken
    for it. `None` otherwise.
    """
    parts = Path(os.path.abspath(src_dir)).parts
    for part in reversed(parts):
        if part.startswith("models--") and part.count("--") >= 2:
            return "/".join(part[len("models--") :].split("--", 1))
    return f"google/{parts[-1]}" if parts and parts[-1] in GOOGLE_CHECKPOINTS else None


def resolve_source_dir(src: str | os.PathLike) -> Path:
    r"""
    The local folder of an old checkpoint: `src` itself when it is a folder, else the snapshot of the Hub repo `src`
    (`google/realm-orqa-nq-openqa`) in the Hugging Face cache, downloaded unless `HF_HUB_OFFLINE=1`.

    Raises:
        `FileNotFoundError`: in one line naming `src` and what to do.
    """
    path = Path(src)
    if path.is_dir():
        return path
    from ..hub.download import hub_offline, is_repo_id

    if path.exists() or not is_repo_id(os.fspath(src)):
        raise FileNotFoundError(
            f"--src {os.fspath(src)!r} is not a folder; pass the folder of an old checkpoint (config.json + weights) "
            "or its Hub id (e.g. google/realm-orqa-nq-openqa)."
        )
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(os.fspath(src), local_files_only=hub_offline()))
    except Exception as error:  # offline and not cached, unknown repo, network: one line either way
        how = f"`realm-hf download {os.fspath(src)}` on a machine with access to the Hub first" if hub_offline() else (
            "check the repo id and your connection")
        raise FileNotFoundError(
            f"--src {os.fspath(src)!r} is not a folder, and the Hub repo could not be read "
            f"({type(error).__name__}); run {how}, or pass a local folder."
        ) from None


def _conversion_record(
    checkpoint: RealmCheckpoint, src_dir: Path, kind: str, source_id: str | None, converted: list[str], model
) -> dict:
    scorer = kind == "embedder" and any(name.startswith("embedder.") for name in checkpoint.state_dict)
    record = {
        "format": 1,
        "source": source_id,
        "source_path": str(src_dir.resolve()),
        "old_class": "RealmScorer" if scorer else _OLD_CLASSES[kind],
        "kind": kind,
        "license": "apache-2.0" if source_id is not None and source_id.startswith("google/realm-") else None,
        "converted": converted,
        "realm_hf_version": _package_version(),
    }
    if kind == "openqa":
        record["answer_rule"] = model.config.answer_rule
    return record


def _package_version() -> str:
    from ..index.manifest import package_version

    return package_version()


def convert_checkpoint(
    src_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    kind: str | None = None,
    block_embeddings_path: str | os.PathLike | None = None,
    mask_token_id: int | None = None,
    *,
    corpus: bool = True,
    index_type: str | None = None,
    overwrite: bool = False,
    source_id: str | None = None,
):
    r"""
    Convert an old transformers-REALM checkpoint directory into a realm_hf folder: the model (safetensors), the
    tokenizer when the checkpoint has one, `conversion.json` (the source and what was converted) and, for an old
    `RealmForOpenQA` with its `block_records.npy`, the corpus index `index/` (blocks from the records, the old
    `block_emb` as its embeddings), so that `pipeline("realm-open-qa", model=output_dir)` answers at once. The folder
    appears whole or not at all.

    Args:
        src_dir (`str` or `os.PathLike`): The old checkpoint directory, or its Hub id (see [`resolve_source_dir`]).
        output_dir (`str` or `os.PathLike`): Where the converted folder is written; refused when it exists and is
            not empty, unless `overwrite=True` (then it is replaced once the new folder is complete).
        kind (`str`, *optional*): `"embedder"` (also `RealmScorer`), `"encoder"`, `"reader"` or `"openqa"`;
            detected from the tensor names when omitted.
        block_embeddings_path (`str` or `os.PathLike`, *optional*): For an old `RealmForOpenQA`, also write its
            `block_emb` to this safetensors file (see [`extract_block_embeddings`]).
        mask_token_id (`int`, *optional*): `[MASK]` id for the encoder when the checkpoint has no `vocab.txt`.
        corpus (`bool`, *optional*, defaults to `True`): For an old `RealmForOpenQA`, convert its corpus into
            `index/` (see [`convert_corpus`]); `False` writes the weights only.
        index_type (`str`, *optional*): The index type of `index/`; defaults to
            [`realm_hf.convert.corpus.default_index_type`] (exact up to 2M blocks, `"IVF4096,SQ8"` above).
        overwrite (`bool`, *optional*, defaults to `False`): Replace an existing `output_dir`.
        source_id (`str`, *optional*): The Hub id of the source (recorded for the model card); told from the path
            when omitted (see [`source_repo_id`]).

    Returns:
        The converted model (eval mode).
    """
    from ..index.atomic import atomic_directory
    from ..checkpoints.index_location import DEFAULT_INDEX_FOLDER  # where a model's index is looked for first
    from .corpus import BLOCK_RECORDS_FILE, convert_corpus

    given_src = src_dir
    src_dir, output_dir = resolve_source_dir(src_dir), Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not overwrite:
        raise FileExistsError(
            f"--output {output_dir} exists and is not empty; choose a new folder, or pass --overwrite "
            "(overwrite=True) to replace it once the new one is complete."
        )
    checkpoint = load_realm_checkpoint(src_dir)
    detected = detect_kind(checkpoint.state_dict.keys() | ({BLOCK_EMB} if checkpoint.block_emb_shape else set()))
    if kind is None:
        kind = detected
    else:
        if kind not in KIND_ALIASES:
            raise ValueError(f"kind={kind!r} is not one of {KINDS} (or None to detect it).")
        kind = KIND_ALIASES[kind]
        if kind != detected:
            logger.warning(
                "kind=%r was given but the tensor names look like %r; converting as %r.", kind, detected, kind
            )
    with_corpus = kind == "openqa" and checkpoint.block_emb_shape is not None and corpus
    if with_corpus and not (src_dir / BLOCK_RECORDS_FILE).is_file():
        raise FileNotFoundError(
            f"{src_dir} has block_emb but no {BLOCK_RECORDS_FILE}, the texts of its corpus: download the whole "
            f"repo (`hf download google/realm-orqa-nq-openqa --local-dir {src_dir}`), or pass --no-corpus to "
            "convert the weights only."
        )
    if block_embeddings_path is not None and checkpoint.block_emb_shape is None:
        raise RealmConversionError(f"{src_dir} holds no block_emb to write to {block_embeddings_path}.")
    logger.info("Converting %s as a REALM %s checkpoint", src_dir, kind)
    if kind == "encoder":
        model = convert_knowledge_encoder(checkpoint, mask_token_id=mask_token_id)
    else:
        model = _CONVERTERS[kind](checkpoint)
    if source_id is None:
        source_id = source_repo_id(src_dir) or (os.fspath(given_src) if not Path(given_src).exists() else None)

    with atomic_directory(output_dir) as tmp:
        tmp = Path(tmp)
        converted = ["weights"]
        if with_corpus:
            index = convert_corpus(
                src_dir, tmp / DEFAULT_INDEX_FOLDER, index_type=index_type,
                provenance={
                    "source": source_id or str(src_dir.resolve()),
                    "embedded_by": "the pre-trained REALM document embedder of the source (for google/realm-orqa-*: "
                    "google/realm-cc-news-pretrained-embedder), not a tower of the converted model",
                    "query_tower": "the converted RealmForOpenQA's retriever.query_embedder, which the source "
                    "scored these embeddings with",
                },
            )
            model.config.index_fingerprint = index.fingerprint  # pairs the model with the embeddings it was trained on
            converted += [f"block records -> index/blocks ({len(index)} blocks)",
                          f"block_emb -> index/embeddings.npy (index type {index.index_type})"]
        model.save_pretrained(str(tmp))
        if _save_tokenizer(checkpoint, tmp):
            converted.append("tokenizer (as BertTokenizer)")
            logger.info("Saved the tokenizer (as BertTokenizer) to %s", output_dir)
        if block_embeddings_path is not None:
            extract_block_embeddings(checkpoint.path, block_embeddings_path)
        elif checkpoint.block_emb_shape is not None and not with_corpus:
            logger.info(
                "The checkpoint holds corpus embeddings block_emb %s; they are not model weights and were left out "
                "(--no-corpus).", list(checkpoint.block_emb_shape),
            )
        record = _conversion_record(checkpoint, src_dir, kind, source_id, converted, model)
        (tmp / CONVERSION_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    logger.info("Saved the converted %s to %s", type(model).__name__, output_dir)
    return model
