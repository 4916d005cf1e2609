"""Pieces shared by the REALM models: the base class, input checks and BERT loading helpers."""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel, PreTrainedModel
from transformers import initialization as init
from transformers.models.bert.modeling_bert import BertEmbeddings, BertLMPredictionHead


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
