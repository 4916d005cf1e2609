"""`RealmFillMaskPipeline`: fill `[MASK]`s the REALM pre-training way, marginalizing over retrieved documents.

```python
>>> import realm_hf
>>> fill = realm_hf.RealmFillMaskPipeline.from_pretrained("outputs/pretrain")  # retriever/ encoder/ index/
>>> fill("An equilateral triangle is easily constructed using a straightedge and compass, because 3 is a "
...      "[MASK] prime.", top_k=1)
[{'token': 10768, 'token_str': 'fermat', 'sequence': '... because 3 is a fermat prime.', 'score': 0.129,
  'score_without_retrieval': 1.1e-14,
  'supporting_blocks': [{'block_id': 57, 'title': 'Fermat number', 'score': 0.21, 'posterior': 0.93,
                         'likelihood': 0.998}, ...],
  'null_document': {'score': 0.05, 'posterior': 0.0, 'likelihood': 1.1e-14}}]
```

This is the paper's Table 3: `score` is the marginal `p(y | x) = Σ_z p(z | x) p(y | z, x)` over the candidates of
pre-training, `score_without_retrieval` is `p(y | ∅, x)` (the encoder reading the null document, i.e. no retrieval),
and each supporting block has its prior `p(z | x)` (`score`), its likelihood `p(y | z, x)` and its posterior
`p(z | y, x) = p(z | x) p(y | z, x) / p(y | x)`, blocks sorted by posterior.

Candidates are built as in pre-training, with [`RealmPretrainingCollator`]: the null document ∅ (the empty block
`[CLS] [SEP] [SEP]`) is candidate 0 and the top `num_blocks` blocks of the index follow (default
`encoder.config.num_candidates - 1`); the retriever scores all of them with its document tower (so ∅ has a prior
too) and the knowledge-augmented encoder reads `[CLS] x [SEP] z_body [SEP]`. When the encoder was trained without
the null document (`use_null_document=False`) ∅ gets no prior mass, but `p(y | ∅, x)` is still reported.

Several `[MASK]`s form one target `y = (y_1 .. y_m)` (consecutive masks: a multi-wordpiece span), with
`p(y | z, x) = Π_j p(y_j | z, x)` as in pre-training. Since the marginal over z does not factor over positions,
predictions are decoded by a beam search over the positions, left to right, each hypothesis scored by the exact
marginal of its prefix `Σ_z p(z | x) Π_{i<=j} p(y_i | z, x)` (beam width `max(top_k, beam_size)`); the returned
scores are the exact marginals of the whole span, the search is approximate (width 1 is greedy decoding).

Answers are whole words: the first `[MASK]` of each run of consecutive masks never takes a continuation wordpiece
(`##gar`), so one `[MASK]` is filled with a whole word of the vocabulary. A word the tokenizer splits into several
wordpieces (`tokenizer.tokenize("Larkspur")` -> `['lark', '##sp', '##ur']`) takes one `[MASK]` per wordpiece, the
later ones free to continue it. The scores stay `p(y | x)` over the whole vocabulary (not renormalized).

Loading: `pipeline("realm-fill-mask", model="<dir>")` with the pre-training output directory as saved (its top-level
`config.json`, see `realm_hf.pipelines.masked_lm`), or `pipeline("realm-fill-mask", model="<dir>/encoder")` (the
retriever and the index are found next to the encoder, in `<dir>/retriever` and `<dir>/index`), or
`RealmFillMaskPipeline.from_pretrained(<dir>)`, or `pipeline("realm-fill-mask", model="org/realm-cc-news")` for the
checkpoint published by `realm-hf publish` (its `retriever/` read from the same repo, its index from the dataset repo
its config names: see `realm_hf.checkpoints.parts`), or with everything explicit:
`pipeline("realm-fill-mask", model=encoder, tokenizer=tokenizer, retriever=retriever, index=index)`.
`pipeline("fill-mask", model="<dir>")` gives transformers' own pipeline the same marginal, mask by mask.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from transformers.pipelines.base import Pipeline

from ..data.collators import IGNORE_INDEX, RealmPretrainingCollator, retriever_inputs
from ..index.manifest import fingerprint_module
from ..modeling import RealmKnowledgeEncoder, RealmRetriever
from ..utils.messages import excerpt
from ._utils import (
    check_batch,
    check_fast_tokenizer,
    check_positive_int,
    check_text,
    encode_query,
    resolve_call_index,
)
from ..checkpoints.index_location import FINGERPRINT_OPT_OUT, check_index_fingerprint, index_source
from ..checkpoints.parts import FILL_MASK_TASK, checkpoint_source, find_index, find_retriever, find_tokenizer

logger = logging.getLogger(__name__)

__all__ = ["FILL_MASK_TASK", "RealmFillMaskPipeline", "beam_search", "score_candidates"]


class RealmFillMaskPipeline(Pipeline):
    r"""
    Retrieval-augmented masked language modeling with a REALM pre-training checkpoint: a [`RealmKnowledgeEncoder`]
    (the pipeline's `model`), a [`RealmRetriever`] and the corpus index. Registered as the task `"realm-fill-mask"`
    when `realm_hf` is imported.

    Args:
        model ([`RealmKnowledgeEncoder`]): The knowledge-augmented encoder.
        tokenizer (`PreTrainedTokenizerFast`, *optional*): Defaults to the one saved next to the encoder or retriever.
        retriever ([`RealmRetriever`] or `str`, *optional*): Defaults to `retriever/` in the encoder's directory or
            in its parent (the pre-training output directory).
        index ([`RealmIndex`] or `str`, *optional*): Defaults to `index/` there.
        top_k (`int`, *optional*, defaults to 5): Predictions returned per input.
        num_blocks (`int`, *optional*): Blocks retrieved per input (default `num_candidates - 1`, ∅ completing them).
        beam_size (`int`, *optional*): Beam width for several masks (at least `top_k`).
        check_fingerprint (`bool`, *optional*, defaults to `True`): Refuse an index (the pipeline's or one passed to
            a call) whose manifest names other document-tower weights than the retriever's; `False` uses it anyway.
        trust_index_file (`bool`, *optional*, defaults to `False`): Read the faiss file of an index this user's realm_hf
            did not write (from the Hub, a copied folder) with faiss's native reader instead of rebuilding its search
            structure from its embeddings.

    Returns:
        Per input text, a list of `top_k` dicts, best first: `token` (an id, or a list of ids for several masks),
        `token_str`, `sequence` (the text with the prediction filled in), `score` (`p(y | x)`),
        `score_without_retrieval` (`p(y | ∅, x)`), `supporting_blocks` (retrieved blocks sorted by posterior, each
        `{"block_id", "title", "score": p(z|x), "posterior": p(z|y,x), "likelihood": p(y|z,x)}`) and
        `null_document` (`{"score", "posterior", "likelihood"}` of ∅).
    """

    _load_tokenizer = None
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False

    def __init__(
        self,
        model: RealmKnowledgeEncoder,
        tokenizer: Any = None,
        retriever: RealmRetriever | str | os.PathLike | None = None,
        index: Any = None,
        check_fingerprint: bool = True,
        trust_index_file: bool = False,
        **kwargs: Any,
    ):
        if not isinstance(model, RealmKnowledgeEncoder):
            raise TypeError(
                f"The {FILL_MASK_TASK!r} pipeline's model is a realm_hf RealmKnowledgeEncoder (the `encoder/` of a "
                f"pre-training output directory), got {type(model).__name__}."
            )
        source = checkpoint_source(model)
        retriever, retriever_dir = find_retriever(retriever, source)
        if tokenizer is None:
            tokenizer = find_tokenizer(source, retriever_dir)
        check_fast_tokenizer(tokenizer, type(self).__name__)
        if tokenizer.mask_token_id is None:
            raise ValueError("The tokenizer has no [MASK] token; pass the BERT tokenizer the encoder was trained with.")
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)
        self.model.eval()
        self.retriever = retriever.to(self.device).eval()
        self._expected_fingerprint = (
            fingerprint_module(self.retriever.document_embedder) if check_fingerprint else None
        )
        self._trust_index_file = bool(trust_index_file)
        self.index = find_index(
            index, source, self.retriever.config.embedding_size, self._expected_fingerprint, self._trust_index_file,
            config=model.config,
        )
        self._call_indexes: dict[str, Any] = {}

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, **kwargs: Any) -> RealmFillMaskPipeline:
        r"""
        The pipeline over a pre-training output directory (`retriever/`, `encoder/` with the tokenizer, `index/`),
        built through `transformers.pipeline("realm-fill-mask", ...)`.

        Args:
            directory (`str` or `os.PathLike`): The directory `RealmPretrainer.save_model` wrote.
            kwargs: Passed to `transformers.pipeline` (`device`, `top_k`, `retriever`, `index`, `tokenizer`, ...).
        """
        from transformers import pipeline

        directory = os.fspath(directory)
        encoder_dir = os.path.join(directory, "encoder")
        if not os.path.isfile(os.path.join(encoder_dir, "config.json")):
            raise FileNotFoundError(
                f"{directory} is not a REALM pre-training output directory: no encoder/config.json. It should hold "
                "retriever/, encoder/ and index/ (RealmPretrainer.save_model)."
            )
        return pipeline(FILL_MASK_TASK, model=encoder_dir, **kwargs)

    # ----------------------------------------------------------------------------------------------- parameters
    def _sanitize_parameters(self, top_k=None, num_blocks=None, index=None, beam_size=None, **unknown):
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected arguments {sorted(unknown)}; it takes top_k, num_blocks, "
                "beam_size, index (and batch_size, num_workers, device at construction)."
            )
        forward_params: dict[str, Any] = {}
        postprocess_params: dict[str, Any] = {}
        if top_k is not None:
            postprocess_params["top_k"] = check_positive_int("top_k", top_k)
        if beam_size is not None:
            postprocess_params["beam_size"] = check_positive_int("beam_size", beam_size)
        if num_blocks is not None:
            forward_params["num_blocks"] = check_positive_int("num_blocks", num_blocks)
        if index is not None:
            forward_params["index"] = postprocess_params["index"] = index
        return {}, forward_params, postprocess_params

    def _continuation_ids(self) -> torch.Tensor:
        """Ids of the vocabulary's continuation wordpieces (`##...`), which never start a filled word."""
        if getattr(self, "_continuations", None) is None:
            ids = sorted(i for token, i in self.tokenizer.get_vocab().items() if token.startswith("##"))
            self._continuations = torch.tensor(ids, dtype=torch.long)
        return self._continuations

    def _resolve_index(self, index: Any) -> Any:
        resolved = resolve_call_index(
            index, self.index, self._call_indexes, expected_dim=self.retriever.config.embedding_size,
            trust_index_file=self._trust_index_file,
        )
        if index is not None:
            check_index_fingerprint(resolved, self._expected_fingerprint, index_source(index), FINGERPRINT_OPT_OUT)
        return resolved

    # --------------------------------------------------------------------------------------------------- call
    def __call__(self, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
        r"""
        Fill the `[MASK]`s of a text (or of each text of a list / dataset / generator).

        Args:
            inputs: The text(s), each with at least one `[MASK]`.
            top_k (`int`, *optional*): Predictions per text.
            num_blocks (`int`, *optional*): Blocks retrieved per text.
            beam_size (`int`, *optional*): Beam width when a text has several masks.
            index (*optional*): Another index for this call.
        """
        inputs = check_batch(inputs, "text")
        if isinstance(inputs, list) and not inputs:
            return []
        return super().__call__(inputs, *args, **kwargs)

    def preprocess(self, inputs: Any) -> dict[str, torch.Tensor]:
        text = inputs["text"] if isinstance(inputs, dict) and "text" in inputs else inputs
        text = check_text(text, "text")
        mask_id = self.tokenizer.mask_token_id
        encoded = encode_query(
            self.tokenizer, text, self.retriever.config.query_max_length, "text", keep_ids=(mask_id,)
        )
        if not bool((encoded["input_ids"] == mask_id).any()):
            raise ValueError(
                f"The text {excerpt(text)} has no {self.tokenizer.mask_token} token; mask the word(s) to predict."
            )
        if encoded["input_ids"].shape[1] + 1 > self.model.config.max_length:
            raise ValueError(
                f"The text has {encoded['input_ids'].shape[1]} wordpieces, which leaves no room for a document in "
                f"the encoder's max_length={self.model.config.max_length}; shorten it."
            )
        return encoded

    def _forward(
        self, model_inputs: dict[str, torch.Tensor], num_blocks: int | None = None, index: Any = None
    ) -> dict[str, torch.Tensor]:
        return score_candidates(
            self.model, self.retriever, self.tokenizer, self._resolve_index(index), model_inputs, num_blocks
        )

    def postprocess(
        self, model_outputs: dict[str, torch.Tensor], top_k: int = 5, beam_size: int | None = None, index: Any = None
    ) -> list[dict[str, Any]]:
        index = self._resolve_index(index)
        log_prior = model_outputs["log_prior"][0]  # [K]
        mask_positions = model_outputs["mask_positions"][0]
        num_masks = int((mask_positions >= 0).sum())
        mask_positions = mask_positions[:num_masks]
        log_probs = model_outputs["token_log_probs"][0][:, :num_masks]  # [K, m, V]
        block_ids = model_outputs["candidate_block_ids"][0].tolist()  # [K]
        null_index = 0

        # a run of masks starts a word: no continuation piece there (later masks may continue it)
        query = model_outputs["input_ids"][0].tolist()
        starts = [j for j, position in enumerate(mask_positions.tolist())
                  if position == 0 or query[position - 1] != self.tokenizer.mask_token_id]
        log_probs = log_probs.clone()
        continuations = self._continuation_ids()
        continuations = continuations[continuations < log_probs.shape[-1]]
        log_probs[:, torch.tensor(starts, dtype=torch.long)[:, None], continuations[None, :]] = float("-inf")
        hypotheses = beam_search(log_prior, log_probs, top_k=top_k, beam_size=max(top_k, beam_size or top_k))

        retrieved = [j for j, block_id in enumerate(block_ids) if j != null_index and block_id >= 0]
        titles = index.get_blocks([block_ids[j] for j in retrieved], columns=["title"])["title"] if retrieved else []
        results = []
        for tokens, log_joint in hypotheses:
            log_marginal = torch.logsumexp(log_joint, dim=0)
            posterior = (log_joint - log_marginal).exp()  # [K]
            likelihood = log_probs.gather(2, torch.tensor(tokens).view(1, -1, 1).expand(log_probs.shape[0], -1, 1))
            likelihood = likelihood.squeeze(-1).sum(-1).exp()  # [K], p(y | z, x)
            prior = log_prior.exp()
            supporting = [
                {
                    "block_id": int(block_ids[j]),
                    "title": title,
                    "score": float(prior[j]),
                    "posterior": float(posterior[j]),
                    "likelihood": float(likelihood[j]),
                }
                for j, title in zip(retrieved, titles)
            ]
            supporting.sort(key=lambda block: block["posterior"], reverse=True)
            filled = list(query)
            for position, token in zip(mask_positions.tolist(), tokens):
                filled[position] = token
            results.append(
                {
                    "token": tokens[0] if len(tokens) == 1 else list(tokens),
                    "token_str": self.tokenizer.decode(list(tokens)),
                    "sequence": self.tokenizer.decode(filled, skip_special_tokens=True),
                    "score": float(log_marginal.exp()),
                    "score_without_retrieval": float(likelihood[null_index]),
                    "supporting_blocks": supporting,
                    "null_document": {
                        "score": float(prior[null_index]),
                        "posterior": float(posterior[null_index]),
                        "likelihood": float(likelihood[null_index]),
                    },
                }
            )
        return results


def score_candidates(
    encoder: RealmKnowledgeEncoder,
    retriever: RealmRetriever,
    tokenizer: Any,
    index: Any,
    model_inputs: dict[str, torch.Tensor],
    num_blocks: int | None = None,
) -> dict[str, torch.Tensor]:
    r"""
    Retrieve for `[CLS] x [SEP]` queries with [MASK]s and score every candidate as in pre-training.

    Args:
        encoder ([`RealmKnowledgeEncoder`]), retriever ([`RealmRetriever`]), tokenizer, index ([`RealmIndex`]): A
            pre-training checkpoint and its index.
        model_inputs (`dict`): `input_ids`, `attention_mask`, `token_type_ids` of shape `(B, Lq)` (right padded).
        num_blocks (`int`, *optional*): Blocks retrieved per query (default `num_candidates - 1`, ∅ completing them).

    Returns:
        `dict`: `log_prior` `(B, K)` = `log p(z | x)` (∅ is candidate 0), `token_log_probs` `(B, K, m, V)` =
        `log p(y_j | z, x)` at the m masks, `mask_positions` `(B, m)` (-1 padded), `candidate_block_ids` `(B, K)`
        (-1 for ∅) and `input_ids`.
    """
    input_ids = model_inputs["input_ids"]  # [B, Lq]
    attention_mask = model_inputs["attention_mask"]
    device = input_ids.device
    batch_size = input_ids.shape[0]
    mask_id = tokenizer.mask_token_id
    config = encoder.config

    query_embeds = retriever.embed_queries(input_ids, attention_mask, model_inputs["token_type_ids"])
    default_blocks = max(config.num_candidates - 1, 1) if config.use_null_document else config.num_candidates
    k = min(num_blocks or default_blocks, len(index))
    _, block_ids = index.search(query_embeds.float().cpu(), k)  # [B, k]
    rows = index.get_blocks(block_ids, columns=["block_id", "input_ids", "token_type_ids"])
    retrieved = [[{name: rows[name][b][j] for name in rows} for j in range(k)] for b in range(batch_size)]

    # the examples of pre-training: `[CLS] x [SEP]`, a label at every [MASK] (its value is never read here)
    examples = []
    for b in range(batch_size):
        query = input_ids[b, : int(attention_mask[b].sum())].tolist()
        examples.append(
            {"input_ids": query, "labels": [mask_id if t == mask_id else IGNORE_INDEX for t in query]}
        )
    collator = RealmPretrainingCollator(
        tokenizer,
        block_max_length=retriever.config.block_max_length,
        joined_max_length=config.max_length,
        use_null_document=True,  # ∅ is candidate 0: p(y | ∅, x) is always reported
    )
    batch = {k_: v.to(device) if isinstance(v, torch.Tensor) else v for k_, v in collator(examples, retrieved).items()}
    null_index = batch["null_candidate_index"]

    relevance = retriever(
        **retriever_inputs(batch),
        # a learned null-document prior (config.null_document_score="learned") scores ∅ as in training
        null_candidate_index=null_index if config.use_null_document else None,
    ).relevance_scores.float()  # [B, K]
    if not config.use_null_document:
        relevance[:, null_index] = float("-inf")  # ∅ was not a candidate in training: no prior mass
    log_prior = torch.log_softmax(relevance, dim=-1)  # [B, K]

    outputs = encoder(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
        labels=batch["labels"],
    )
    # masked_positions rows are (b, k, position) in lexicographic order: each (b, k) group holds the m_b masks of
    # example b in position order
    token_log_probs = torch.log_softmax(outputs.masked_token_logits.float(), dim=-1)  # [M, V]
    num_candidates = batch["input_ids"].shape[1]
    num_masks = (batch["labels"] != IGNORE_INDEX).sum(-1)  # [B]
    max_masks = int(num_masks.max())
    positions = outputs.masked_positions  # [M, 3]
    group = positions[:, 0] * num_candidates + positions[:, 1]  # [M]
    group_start = torch.cumsum(num_masks.repeat_interleave(num_candidates), 0) - num_masks.repeat_interleave(
        num_candidates
    )  # [B*K], first row of each group
    slot = torch.arange(len(positions), device=device) - group_start[group]  # [M]
    per_mask = token_log_probs.new_zeros((batch_size, num_candidates, max_masks, token_log_probs.shape[-1]))
    per_mask[positions[:, 0], positions[:, 1], slot] = token_log_probs  # [B, K, m, V]
    mask_positions = torch.full((batch_size, max_masks), -1, dtype=torch.long, device=device)
    first = positions[:, 1] == 0
    mask_positions[positions[first, 0], slot[first]] = positions[first, 2]
    return {
        "log_prior": log_prior,  # [B, K]
        "token_log_probs": per_mask,  # [B, K, m, V]
        "mask_positions": mask_positions,  # [B, m], -1 padded
        "candidate_block_ids": batch["candidate_block_ids"],  # [B, K], -1 for ∅
        "input_ids": input_ids,  # [B, Lq]
    }


def beam_search(
    log_prior: torch.Tensor, log_probs: torch.Tensor, top_k: int, beam_size: int
) -> list[tuple[tuple[int, ...], torch.Tensor]]:
    r"""
    The best fillings `y = (y_1 .. y_m)` of m masks by their marginal `log Σ_z p(z | x) Π_j p(y_j | z, x)`.

    Args:
        log_prior (`torch.Tensor` of shape `(K,)`): `log p(z | x)`.
        log_probs (`torch.Tensor` of shape `(K, m, V)`): `log p(y_j = v | z, x)` at each mask position.
        top_k (`int`): Fillings returned.
        beam_size (`int`): Hypotheses kept between positions (`>= top_k`; 1 with `top_k=1` is greedy).

    Returns:
        `list[tuple[tuple[int, ...], torch.Tensor]]`: up to `top_k` `(token ids, log p(z | x) + log p(y | z, x) [K])`,
        best marginal first. Scores of prefixes are exact marginals (positions are independent given z).
    """
    num_masks, vocab_size = log_probs.shape[1], log_probs.shape[2]
    hypotheses: list[tuple[tuple[int, ...], torch.Tensor]] = [((), log_prior)]
    for j in range(num_masks):
        width = top_k if j == num_masks - 1 else beam_size
        joints = torch.stack([joint for _, joint in hypotheses])  # [H, K]
        extended = joints.unsqueeze(-1) + log_probs[:, j].unsqueeze(0)  # [H, K, V]
        marginal = torch.logsumexp(extended, dim=1)  # [H, V]
        best = marginal.view(-1).topk(min(width, marginal.numel())).indices
        hypotheses = [
            (hypotheses[int(i) // vocab_size][0] + (int(i) % vocab_size,), extended[int(i) // vocab_size, :, int(i) % vocab_size])
            for i in best
        ]
    return hypotheses
