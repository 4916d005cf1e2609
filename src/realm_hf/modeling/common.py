"""Pieces shared by the REALM models: the base class, input checks and BERT loading helpers."""

from __future__ import annotations

import glob
import logging
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertForMaskedLM, BertModel, PreTrainedModel
from transformers import initialization as init
from transformers.models.bert.modeling_bert import BertEmbeddings, BertLMPredictionHead

from ..utils.files import MODEL_FILE_HINT, reading_model_files
from ..utils.permissions import honour_umask
from ..utils.quiet import quiet_checkpoint_io, without_load_report
from .checkpoint_layout import is_pretraining_checkpoint, not_a_part_error, pretraining_checkpoint_part

logger = logging.getLogger(__name__)
_reported_without_mlm_head: set[str] = set()


class RealmPreTrainedModel(PreTrainedModel):
    """Base class of the REALM models: weight initialization and attention-backend support.

    Every REALM model composes one or more `BertModel`s built from `config.bert_config` (or a sub-config
    that has one), so BERT's initialization applies to them unchanged.
    """

    base_model_prefix = "realm"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    pretraining_checkpoint_folder: str | None = None
    """The folder of a REALM pre-training checkpoint that holds this model (`"retriever"`, `"encoder"`): given such a
    checkpoint and no `subfolder`, `from_pretrained` reads that folder. None: a pre-training checkpoint holds no such
    model, and `from_pretrained` refuses one in a line that says how to get it (see `realm_hf.modeling.checkpoint_layout`)."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike | None, *model_args, **kwargs):
        r"""
        [`~transformers.PreTrainedModel.from_pretrained`] without the per-checkpoint "Loading weights" progress bar
        (a REALM job reads several checkpoints; its stages have bars of their own). Arguments are the same.

        The model records the Hub revision it was read from as `hub_revision` (the commit when transformers resolved
        the revision, as `AutoModel` and `pipeline` do; `None` for a local directory), so that the index folder of
        the same repo is read at that revision too (`realm_hf.checkpoints.index_location`). A damaged file of a local
        directory (a cut `model.safetensors`, a broken `config.json`) is named in an `UnreadableFileError`.

        Given a REALM pre-training checkpoint (`retriever/` + `encoder/`, a local directory or a Hub repo) and no
        `subfolder`, a `RealmRetriever` or `RealmKnowledgeEncoder` is read from its folder; any other model is refused
        with a `ValueError` that says how to get one (fine-tune the checkpoint).
        """
        if not kwargs.get("subfolder") and pretrained_model_name_or_path is not None:
            folder = cls.pretraining_checkpoint_folder
            if folder is not None and pretraining_checkpoint_part(pretrained_model_name_or_path, folder, **kwargs):
                kwargs["subfolder"] = folder
            elif folder is None and is_pretraining_checkpoint(pretrained_model_name_or_path, **kwargs):
                raise not_a_part_error(pretrained_model_name_or_path, cls.__name__)
        with quiet_checkpoint_io(), reading_model_files(pretrained_model_name_or_path, MODEL_FILE_HINT):
            loaded = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # (model, loading_info) with output_loading_info
        revision = kwargs.get("revision")
        is_local = pretrained_model_name_or_path is None or os.path.isdir(os.fspath(pretrained_model_name_or_path))
        model.hub_revision = None if is_local else getattr(revision, "resolved", None) or revision
        return loaded

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> Any:
        r"""
        [`~transformers.PreTrainedModel.save_pretrained`] without the per-checkpoint "Writing model shards" progress
        bar, and with weight files whose mode honours the umask (safetensors >= 0.8 writes them `0o600` beside the
        `0o644` config). Arguments are the same.
        """
        with quiet_checkpoint_io():
            saved = super().save_pretrained(save_directory, *args, **kwargs)
        for path in glob.glob(os.path.join(glob.escape(os.fspath(save_directory)), "model*.safetensors")):
            honour_umask(path)
        return saved

    def _initializer_range(self) -> float:
        bert_config = getattr(self.config, "bert_config", None)
        if bert_config is None:
            bert_config = self.config.retriever_config.bert_config
        return bert_config.initializer_range

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self._initializer_range()
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, BertLMPredictionHead):
            init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)


def load_bert(name_or_path: str | os.PathLike, add_pooling_layer: bool = True) -> BertModel:
    """A BERT checkpoint (Hub id or directory) as a `BertModel`, without the per-checkpoint progress bar."""
    with quiet_checkpoint_io(), reading_model_files(name_or_path, MODEL_FILE_HINT):
        return BertModel.from_pretrained(name_or_path, add_pooling_layer=add_pooling_layer)


def load_bert_for_masked_lm(name_or_path: str | os.PathLike) -> BertForMaskedLM:
    r"""
    A BERT checkpoint as a `BertForMaskedLM`. A checkpoint without an MLM head (sentence embedders such as
    all-MiniLM-L6-v2) is expected: the head starts fresh, which is said in one INFO line (once per checkpoint)
    instead of transformers' load report; keys missing or unexpected anywhere else are still a warning.
    """
    with quiet_checkpoint_io(), without_load_report(), reading_model_files(name_or_path, MODEL_FILE_HINT):
        bert, info = BertForMaskedLM.from_pretrained(name_or_path, output_loading_info=True)
    head_missing = sorted(key for key in info["missing_keys"] if key.startswith("cls."))
    other_missing = sorted(key for key in info["missing_keys"] if not key.startswith("cls."))
    unexpected = sorted(key for key in info["unexpected_keys"] if not key.startswith("pooler."))  # no pooler in MLM
    if head_missing and os.fspath(name_or_path) not in _reported_without_mlm_head:
        _reported_without_mlm_head.add(os.fspath(name_or_path))
        logger.info(
            "%s has no MLM head (as expected of a sentence embedder such as all-MiniLM-L6-v2): the head's transform "
            "starts fresh and its decoder is tied to the word embeddings", name_or_path,
        )
    if other_missing or unexpected or info["mismatched_keys"]:
        logger.warning(
            "Loading BERT from %s: missing %s, unexpected %s, mismatched %s (newly initialized where missing)",
            name_or_path, other_missing, unexpected, sorted(info["mismatched_keys"]),
        )
    return bert


def build_bert(bert_config: BertConfig, add_pooling_layer: bool = False) -> BertModel:
    """A `BertModel` for composition inside a REALM model (its weights are initialized by the parent)."""
    return BertModel(bert_config, add_pooling_layer=add_pooling_layer)


def check_token_inputs(name: str, input_ids: torch.Tensor, expected_dims: int) -> None:
    """Raise a clear error when token ids do not have the expected number of dimensions or are empty."""
    if input_ids is None:
        raise ValueError(f"`{name}` is required.")
    if input_ids.dim() != expected_dims:
        shape = "[B, L]" if expected_dims == 2 else "[B, K, L]"
        raise ValueError(f"`{name}` must have shape {shape}, got a tensor of shape {list(input_ids.shape)}.")
    if input_ids.numel() == 0:
        raise ValueError(f"`{name}` is empty (shape {list(input_ids.shape)}); a batch needs at least one sequence.")


def check_same_shape(reference_name: str, reference: torch.Tensor, **others: torch.Tensor | None) -> None:
    """Raise when an optional companion tensor (attention mask, token types) does not match the ids' shape."""
    for name, tensor in others.items():
        if tensor is not None and tensor.shape != reference.shape:
            raise ValueError(
                f"`{name}` has shape {list(tensor.shape)} but `{reference_name}` has shape {list(reference.shape)}; "
                "they must match (pad both with the tokenizer)."
            )


def flatten_candidates(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """[B, K, L] -> [B*K, L] (None passes through)."""
    return None if tensor is None else tensor.reshape(-1, tensor.shape[-1])


def length_bucket_groups(sorted_lengths: torch.Tensor, length_buckets: int) -> list[slice]:
    """Split ascending row lengths `[N]` into at most `length_buckets` runs, cut where consecutive lengths differ
    most: REALM's short null-document rows part from the full blocks first, then the blocks by their largest gaps."""
    gaps = sorted_lengths[1:] - sorted_lengths[:-1]  # [N-1]
    cuts = gaps.argsort(descending=True, stable=True)[: length_buckets - 1]
    cuts = sorted(int(cut) + 1 for cut, gap in zip(cuts, gaps[cuts]) if gap > 0)
    bounds = [0, *cuts, len(sorted_lengths)]
    return [slice(start, end) for start, end in zip(bounds, bounds[1:])]


def run_bert(
    bert: BertModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    length_buckets: int = 1,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""
    Run `bert` over `[N, L]` sequences, optionally in length buckets, and return its last hidden states `[N, L, H]`
    and pooler output `[N, H]` (None without a pooler).

    With `length_buckets` > 1 the rows are sorted by their number of tokens (the attention mask's ones) and split
    into at most that many groups where consecutive lengths differ most ([`length_bucket_groups`]); each group runs
    padded only to its own longest row, and the states are put back in the original order, zeros at the positions
    cut off (padding, which no attention reads and no head uses). Same outputs to float rounding, less work on
    padding: REALM's candidate sets mix full blocks with the short null document and the last blocks of articles.
    Rows must be right-padded (ones, then zeros); otherwise, or with one bucket, the batch runs as one padded tensor.
    """
    seq_length = input_ids.shape[1]
    bucketed = length_buckets > 1 and attention_mask is not None and input_ids.shape[0] > 1
    if bucketed:
        lengths = attention_mask.sum(-1)  # [N]
        right_padded = attention_mask.bool() == (torch.arange(seq_length, device=lengths.device) < lengths[:, None])
        bucketed = bool(right_padded.all())
    if not bucketed:
        outputs = bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return outputs.last_hidden_state, outputs.pooler_output
    order = lengths.argsort()  # [N]
    hidden_parts, pooled_parts = [], []
    for group in length_bucket_groups(lengths[order], length_buckets):
        group = order[group]  # rows of this bucket, in sorted order
        length = max(int(lengths[group].max()), 1)
        outputs = bert(
            input_ids=input_ids[group, :length],
            attention_mask=attention_mask[group, :length],
            token_type_ids=None if token_type_ids is None else token_type_ids[group, :length],
        )
        hidden_parts.append(F.pad(outputs.last_hidden_state, (0, 0, 0, seq_length - length)))  # [n, L, H]
        pooled_parts.append(outputs.pooler_output)
    restore = order.argsort()  # sorted position of each original row
    hidden = torch.cat(hidden_parts)[restore]  # [N, L, H]
    pooled = None if pooled_parts[0] is None else torch.cat(pooled_parts)[restore]  # [N, H]
    return hidden, pooled
