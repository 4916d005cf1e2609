"""The converters, one per old class, and [`convert_checkpoint`], which detects the kind, converts and saves."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..configuration import RealmForOpenQAConfig, RealmKnowledgeEncoderConfig
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
        [`RealmForOpenQA`] in eval mode (`top_k` = the old `reader_beam_size`).
    """
    checkpoint = as_checkpoint(src)
    config = RealmForOpenQAConfig(
        retriever_config=retriever_config(checkpoint.config).to_dict(),
        reader_config=reader_config(checkpoint.config).to_dict(),
        top_k=realm_config_value(checkpoint.config, "reader_beam_size"),
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


def convert_checkpoint(
    src_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    kind: str | None = None,
    block_embeddings_path: str | os.PathLike | None = None,
    mask_token_id: int | None = None,
):
    r"""
    Convert an old transformers-REALM checkpoint directory and `save_pretrained` the realm_hf model (safetensors)
    to `output_dir`, with the tokenizer when the checkpoint has one.

    Args:
        src_dir (`str` or `os.PathLike`): The old checkpoint directory.
        output_dir (`str` or `os.PathLike`): Where the converted model is saved.
        kind (`str`, *optional*): `"embedder"` (also `RealmScorer`), `"encoder"`, `"reader"` or `"openqa"`;
            detected from the tensor names when omitted.
        block_embeddings_path (`str` or `os.PathLike`, *optional*): For an old `RealmForOpenQA`, where to write its
            corpus embeddings `block_emb` (see [`extract_block_embeddings`]). They never go into `output_dir`'s
            weights; without this argument they are left out (with a log line saying so).
        mask_token_id (`int`, *optional*): `[MASK]` id for the encoder when the checkpoint has no `vocab.txt`.

    Returns:
        The converted model (eval mode).
    """
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
    logger.info("Converting %s as a REALM %s checkpoint", src_dir, kind)
    if kind == "encoder":
        model = convert_knowledge_encoder(checkpoint, mask_token_id=mask_token_id)
    else:
        model = _CONVERTERS[kind](checkpoint)

    output_dir = Path(output_dir)
    model.save_pretrained(str(output_dir))
    if _save_tokenizer(checkpoint, output_dir):
        logger.info("Saved the tokenizer (as BertTokenizer) to %s", output_dir)
    if checkpoint.block_emb_shape is not None:
        if block_embeddings_path is not None:
            extract_block_embeddings(checkpoint.path, block_embeddings_path)
        else:
            logger.info(
                "The checkpoint holds corpus embeddings block_emb %s; they are not model weights and were left out. "
                "Pass block_embeddings_path= (--block-embeddings FILE) to write them for the index.",
                list(checkpoint.block_emb_shape),
            )
    elif block_embeddings_path is not None:
        raise RealmConversionError(f"{src_dir} holds no block_emb to write to {block_embeddings_path}.")
    logger.info("Saved the converted %s to %s", type(model).__name__, output_dir)
    return model
