"""A REALM pre-training output directory by its top-level path, in `pipeline("realm-fill-mask")` and `pipeline("fill-mask")`.

What `RealmPretrainer.save_model` writes (`<output_dir>/final`)::

    config.json, tokenizer files   the encoder's config and the tokenizer: the face transformers' `pipeline()` reads
    encoder/                       RealmKnowledgeEncoder (+ tokenizer)
    retriever/                     RealmRetriever (+ tokenizer)
    index/                         RealmIndex of the final document tower

`transformers.pipeline(task, model=<dir>)` reads `<dir>/config.json` before anything of ours runs, so the top level
must have one. Then:

- `"realm-fill-mask"` loads its model with [`RealmPretrainingEncoder`], which takes the weights from `encoder/` when
  the path is a whole output directory (`realm_hf.checkpoints.encoder_subfolder`); the pipeline finds `retriever/`
  and `index/` next to it (`realm_hf.checkpoints.load_pretraining_parts`).
- `"fill-mask"` (transformers' own `FillMaskPipeline`) loads `AutoModelForMaskedLM`, for which realm_hf registers
  [`RealmRetrievalAugmentedMaskedLM`]: the encoder, the retriever and the index as one module whose `logits` at each
  `[MASK]` are the log marginal `log p(y_j | x) = log Σ_z p(z | x) p(y_j | z, x)` over the candidates of pre-training
  (∅ and the retrieved blocks). So its scores for one mask are the `"realm-fill-mask"` scores; with several masks
  `FillMaskPipeline` ranks each mask on its own, where `"realm-fill-mask"` scores the joint filling and returns the
  supporting blocks. Its predictions are raw wordpieces (`##gar` may fill a lone `[MASK]`), as for any BERT: the
  whole-word rule of `"realm-fill-mask"` stays out of these logits, which remain a masked LM's `log p(y_j | x)` over
  the vocabulary (ids alone cannot tell a word's start from a continuation, and `FillMaskPipeline` would renormalize).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from transformers.modeling_outputs import MaskedLMOutput

from ..configuration import RealmKnowledgeEncoderConfig
from ..modeling import RealmKnowledgeEncoder, RealmRetriever
from ..modeling.common import RealmPreTrainedModel
from ..checkpoints.parts import load_encoder, load_pretraining_parts
from .fill_mask import score_candidates


__all__ = ["RealmPretrainingEncoder", "RealmRetrievalAugmentedMaskedLM"]


class RealmPretrainingEncoder:
    r"""
    Model loader of the `"realm-fill-mask"` task: `from_pretrained(path)` returns the [`RealmKnowledgeEncoder`] of a
    pre-training output directory (from `encoder/`), of an encoder directory, or of a Hub repo.
    """

    @staticmethod
    def from_pretrained(
        pretrained_model_name_or_path: str | os.PathLike, *model_args: Any, **kwargs: Any
    ) -> RealmKnowledgeEncoder:
        return load_encoder(pretrained_model_name_or_path, *model_args, **kwargs)


class RealmRetrievalAugmentedMaskedLM(RealmPreTrainedModel):
    r"""
    A REALM pre-training checkpoint as a masked language model for transformers' `"fill-mask"` pipeline: the
    knowledge-augmented encoder, the retriever and the corpus index, marginalizing over retrieved documents.

    Registered with `AutoModelForMaskedLM` for [`RealmKnowledgeEncoderConfig`] when `realm_hf` is imported. The index is
    data, not weights: it is an attribute, never saved with the module.

    Args:
        config ([`RealmKnowledgeEncoderConfig`]): The encoder's config.
        encoder ([`RealmKnowledgeEncoder`]), retriever ([`RealmRetriever`]), index ([`RealmIndex`]): The checkpoint.
        tokenizer (`PreTrainedTokenizerFast`): Its tokenizer (builds the candidates `[CLS] x [SEP] z_body [SEP]`).
        num_blocks (`int`, *optional*): Blocks retrieved per query (default `num_candidates - 1`, ∅ completing them).
    """

    config_class = RealmKnowledgeEncoderConfig
    base_model_prefix = "encoder"

    def __init__(
        self,
        config: RealmKnowledgeEncoderConfig,
        encoder: RealmKnowledgeEncoder,
        retriever: RealmRetriever,
        index: Any,
        tokenizer: Any,
        num_blocks: int | None = None,
    ):
        super().__init__(config)
        self.encoder = encoder
        self.retriever = retriever
        self.index = index
        self.tokenizer = tokenizer
        self.num_blocks = num_blocks

    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: str | os.PathLike, *model_args: Any, **kwargs: Any
    ) -> RealmRetrievalAugmentedMaskedLM:
        r"""
        Load a pre-training output directory (or its `encoder/`): the encoder, and the retriever, index and
        tokenizer found next to it (`retriever/`, `index/` in the directory or its parent).

        Args:
            pretrained_model_name_or_path (`str`): The directory.
            kwargs: Passed to the encoder's `from_pretrained` (`dtype`, `subfolder`, ...); `num_blocks` is kept, and
                `check_fingerprint=False` (e.g. `pipeline("fill-mask", ..., model_kwargs={"check_fingerprint": False})`)
                accepts an index whose manifest names other document-tower weights than the retriever's, and
                `trust_index_file=True` reads the faiss file of an index from the Hub (see `RealmFillMaskPipeline`).
        """
        num_blocks = kwargs.pop("num_blocks", None)
        check_fingerprint = kwargs.pop("check_fingerprint", True)
        trust_index_file = kwargs.pop("trust_index_file", False)
        parts = load_pretraining_parts(
            pretrained_model_name_or_path, *model_args, check_fingerprint=check_fingerprint,
            trust_index_file=trust_index_file, **kwargs,
        )
        model = cls(parts.encoder.config, parts.encoder, parts.retriever, parts.index, parts.tokenizer, num_blocks)
        return model.eval()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> MaskedLMOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(B, L)`): `[CLS] x [SEP]` with at least one `[MASK]`, right padded.
            attention_mask, token_type_ids (`torch.LongTensor` of shape `(B, L)`, *optional*): As usual.

        Returns:
            `MaskedLMOutput`: `logits` of shape `(B, L, V)`: `log p(y_j | x)` (log marginal over the candidates) at the
            `[MASK]` positions, zeros elsewhere.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        scores = score_candidates(
            self.encoder, self.retriever, self.tokenizer, self.index,
            {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids},
            self.num_blocks,
        )
        # log p(y_j | x) = log Σ_z p(z | x) p(y_j | z, x), mask by mask
        marginal = torch.logsumexp(scores["log_prior"][:, :, None, None] + scores["token_log_probs"], dim=1)  # [B, m, V]
        logits = marginal.new_zeros((*input_ids.shape, marginal.shape[-1]))  # [B, L, V]
        mask_positions = scores["mask_positions"]  # [B, m], -1 padded
        rows, slots = torch.nonzero(mask_positions >= 0, as_tuple=True)
        logits[rows, mask_positions[rows, slots]] = marginal[rows, slots]
        return MaskedLMOutput(logits=logits)
