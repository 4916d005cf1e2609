"""`RealmForOpenQA`: retriever (query tower) + span reader, trained by the span-marginal likelihood."""

from __future__ import annotations

import os

import torch

from ..configuration import RealmForOpenQAConfig
from .common import RealmPreTrainedModel
from .outputs import RealmForOpenQAOutput
from .reader import RealmReader
from .retriever import RealmRetriever


class RealmForOpenQA(RealmPreTrainedModel):
    r"""
    REALM for open-domain question answering. The question is embedded by the retriever's query tower and scored
    against the top-k blocks retrieved from a fixed index (their embeddings come from the index, so only the query
    tower and the reader are trained, as in the paper); the reader scores answer spans in each block.

    The model knows nothing of the index: the caller (a pipeline or the trainer) searches the index and passes the
    retrieved blocks' embeddings and the joined reader inputs.

    Args:
        config ([`RealmForOpenQAConfig`]): Model configuration.
    """

    config: RealmForOpenQAConfig
    config_class = RealmForOpenQAConfig

    def __init__(self, config: RealmForOpenQAConfig):
        super().__init__(config)
        self.retriever = RealmRetriever(config.retriever_config)
        self.reader = RealmReader(config.reader_config)
        self.post_init()

    def get_input_embeddings(self):
        return self.reader.get_input_embeddings()

    def set_input_embeddings(self, value) -> None:
        self.reader.set_input_embeddings(value)

    def embed_queries(self, *args, **kwargs) -> torch.Tensor:
        """The retriever's query embeddings `[B, D]` (see [`RealmRetriever.embed_queries`])."""
        return self.retriever.embed_queries(*args, **kwargs)

    def embed_documents(self, *args, **kwargs) -> torch.Tensor:
        """The retriever's document embeddings `[N, D]` (what the index stores)."""
        return self.retriever.embed_documents(*args, **kwargs)

    def forward(
        self,
        query_input_ids: torch.Tensor,
        reader_input_ids: torch.Tensor,
        query_attention_mask: torch.Tensor | None = None,
        query_token_type_ids: torch.Tensor | None = None,
        reader_attention_mask: torch.Tensor | None = None,
        reader_token_type_ids: torch.Tensor | None = None,
        candidate_embeds: torch.Tensor | None = None,
        candidate_input_ids: torch.Tensor | None = None,
        candidate_attention_mask: torch.Tensor | None = None,
        candidate_token_type_ids: torch.Tensor | None = None,
        block_mask: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> RealmForOpenQAOutput:
        r"""
        Args:
            query_input_ids (`torch.LongTensor` of shape `(batch_size, query_length)`): `[CLS] question [SEP]`.
            reader_input_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, seq_length)`):
                `[CLS] question [SEP] block [SEP]` for each retrieved block.
            candidate_embeds (`torch.FloatTensor` of shape `(batch_size, num_candidates, embedding_size)`, *optional*):
                The retrieved blocks' embeddings from the index. Either these or `candidate_input_ids`.
            candidate_input_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, block_length)`, *optional*):
                The retrieved blocks `[CLS] title [SEP] body [SEP]`, embedded by the document tower on the fly.
            block_mask, start_positions, end_positions: see [`RealmReader.forward`].

        Returns:
            [`RealmForOpenQAOutput`]: the reader's output, the retrieval scores, and the best answer span.
        """
        retrieval = self.retriever(
            query_input_ids=query_input_ids,
            query_attention_mask=query_attention_mask,
            query_token_type_ids=query_token_type_ids,
            candidate_input_ids=candidate_input_ids,
            candidate_attention_mask=candidate_attention_mask,
            candidate_token_type_ids=candidate_token_type_ids,
            candidate_embeds=candidate_embeds,
        )
        if reader_input_ids.dim() != 3 or reader_input_ids.shape[:2] != retrieval.relevance_scores.shape:
            raise ValueError(
                f"`reader_input_ids` must have shape [B, K, L] with [B, K] = {list(retrieval.relevance_scores.shape)} "
                f"(one joined sequence per retrieved block), got {list(reader_input_ids.shape)}."
            )
        reading = self.reader(
            input_ids=reader_input_ids,
            attention_mask=reader_attention_mask,
            token_type_ids=reader_token_type_ids,
            block_mask=block_mask,
            relevance_scores=retrieval.relevance_scores,
            start_positions=start_positions,
            end_positions=end_positions,
        )
        return RealmForOpenQAOutput(
            **reading,
            relevance_scores=retrieval.relevance_scores,
            retrieval_log_probs=torch.log_softmax(retrieval.relevance_scores.float(), dim=-1),
            query_embeds=retrieval.query_embeds,
        )

    @classmethod
    def from_components(
        cls, retriever: RealmRetriever, reader: RealmReader, **config_kwargs
    ) -> "RealmForOpenQA":
        """Assemble from a (pre-trained) retriever and reader, keeping their weights."""
        config = RealmForOpenQAConfig(
            retriever_config=retriever.config.to_dict(), reader_config=reader.config.to_dict(), **config_kwargs
        )
        model = cls(config)
        model.retriever.load_state_dict(retriever.state_dict())
        model.reader.load_state_dict(reader.state_dict())
        return model

    @classmethod
    def from_bert(
        cls,
        bert_name_or_path: str | os.PathLike,
        retriever_kwargs: dict | None = None,
        reader_kwargs: dict | None = None,
        **config_kwargs,
    ) -> "RealmForOpenQA":
        """Initialize the retriever and the reader's encoder from one BERT checkpoint."""
        retriever = RealmRetriever.from_bert(bert_name_or_path, **(retriever_kwargs or {}))
        reader = RealmReader.from_bert(bert_name_or_path, **(reader_kwargs or {}))
        return cls.from_components(retriever, reader, **config_kwargs)
