"""`OpenDomainQuestionAnsweringPipeline`: ask a [`RealmForOpenQA`] a question, get an answer with its evidence.

```python
>>> import realm_hf  # registers the task
>>> from transformers import pipeline
>>> qa = pipeline("realm-open-qa", model="path/to/realm-open-qa")  # its index: <dir>/index
>>> qa("who wrote the theory of general relativity?")
{'answer': 'albert einstein', 'score': 0.41, 'block_id': 1234, 'title': 'Albert Einstein',
 'evidence': '... developed by **Albert Einstein** between 1907 and 1915 ...', 'start': 120, 'end': 135,
 'documents': [{'block_id': 1234, 'title': 'Albert Einstein', 'score': 0.62, 'text': '...'}, ...]}
```

For each question the pipeline embeds `[CLS] question [SEP]` with the model's query tower, searches the index for the
top `config.top_k` blocks, reads `[CLS] question [SEP] block_body [SEP]` (block part token type 1) with the reader,
scoring each block by the query embedding against the block's embedding *stored in the index* (as in fine-tuning),
scores each span by `p(z | x) · p(s | z, x)` and ranks answers by their marginal probability
`p(y | x) = Σ_z p(z | x) Σ_{s ∈ S(z, y)} p(s | z, x)`, summed over every span among the best
`max(64, 4 · top_k)` whose text is `y` as exact match compares texts ("The Nile" = "Nile"), in any retrieved block: the quantity
REALM's Open-QA fine-tuning maximizes (`log Σ_z p(y|z,x) p(z|x)`). An answer found in several blocks adds up; a
confident span in one poorly retrieved block no longer beats it. Each answer's provenance (`block_id`, `evidence`)
is its best span.

Spans start and end on word boundaries: a span that begins on a `##` wordpiece or stops before one is no answer.
That is the default answer rule, `answer_rule="marginal"`. A model converted from transformers' REALM
(`realm-hf convert`) carries `answer_rule="best_span"` in its config and answers as the old `RealmForOpenQA` did:
the reader reads `tokenizer(question, block_text)` as a pair truncated longest first to the reader's `max_length`, and
the answer is the single span with the highest retrieval score + span score over the blocks read, its wordpieces
decoded by the tokenizer (`tokenizer.decode`, as the old classes' users did), with no answer filter. Either rule can
be asked for per pipeline or per call (`answer_rule=`).

Answers that only repeat the question are left out (`exclude_question_words`, on by default; see
[`repeats_question`]), the answer filter of Open-QA systems: a reader asked "which river flows through cairo" must not
answer "Cairo". When every candidate repeats the question, the ranking is kept unfiltered rather than left empty.

Answer text is cut from the block text with the fast tokenizer's offset mapping: the reader reads the block text
re-tokenized with offsets, so an answer is always a substring of its block, in the block's original casing. Blocks
are made by tokenizing their sentences with the same tokenizer, so the re-tokenized body is the stored body
wordpieces the fine-tuning collator uses, except for the rare block cut inside a word.

Over-long questions (more than `retriever_config.query_max_length` wordpieces) are truncated to that length with a
logged warning, the same `[CLS] question [SEP]` the retriever and the reader then see; empty or whitespace-only
questions and `None` raise a `ValueError` naming the item.

About `pipeline("question-answering", ...)`: transformers v5 removed that task; `transformers.pipeline` raises a
`KeyError` for it (`_resolve_deprecated_task`) before looking at the model or any registry, so there is no clean
hook that could route a REALM model to this pipeline. Importing realm_hf appends a sentence to that error message
naming the call to make instead: `pipeline("realm-open-qa", model=...)` (`"realm-open-qa"` is a registered alias of
`"open-domain-question-answering"`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers.pipelines.base import Pipeline

from ..modeling import RealmForOpenQA
from .answer_rules import (
    check_answer_rule, continuation_mask, joined_reader_inputs, marginalize_answers, pair_reader_inputs,
    repeats_question, whole_word_spans,
)
from ._utils import (
    block_embeddings,
    check_batch,
    check_fast_tokenizer,
    check_positive_int,
    check_text,
    encode_query,
    resolve_call_index,
)
from ..index.manifest import fingerprint_module
from ..checkpoints.parts import load_tokenizer_from
from ..checkpoints.index_location import (
    FINGERPRINT_OPT_OUT,
    check_index_fingerprint,
    index_source,
    load_index_for_model,
    model_revision,
    resolve_model_dir,
)

logger = logging.getLogger(__name__)

__all__ = [
    "OPEN_QA_TASK", "OPEN_QA_TASK_ALIAS", "OpenDomainQuestionAnsweringPipeline", "marginalize_answers", "repeats_question",
]

OPEN_QA_TASK = "open-domain-question-answering"
OPEN_QA_TASK_ALIAS = "realm-open-qa"
"""The short name of the task (a `PIPELINE_REGISTRY` task alias), paired with `"realm-fill-mask"`."""
# spans kept per question before those of the same answer text are summed (see `marginalize_answers`)
_MIN_SPAN_CANDIDATES = 64


class OpenDomainQuestionAnsweringPipeline(Pipeline):
    r"""
    Open-domain question answering with a [`RealmForOpenQA`] and its corpus index: retrieve, read, answer with
    provenance. Registered as the task `"open-domain-question-answering"` (alias `"realm-open-qa"`) when `realm_hf`
    is imported.

    Args:
        model ([`RealmForOpenQA`]): The model (put in eval mode).
        tokenizer (`PreTrainedTokenizerFast`, *optional*): Its fast BERT tokenizer; defaults to the one saved in the
            model directory.
        index ([`RealmIndex`] or `str`, *optional*): The corpus index, or its directory. Defaults to the model's own
            index, found by [`load_index_for_model`]: `<model dir>/index`, then `config.index_repo_id`.
        check_fingerprint (`bool`, *optional*, defaults to `True`): Refuse an index (the model's, one given here or
            to a call) whose manifest names other document-tower weights than the model's (or than the
            `config.index_fingerprint` recorded at fine-tuning); `False` uses it anyway.
        trust_index_file (`bool`, *optional*, defaults to `False`): Read the faiss file of an index that this user's
            realm_hf did not write (from the Hub, a copied folder) with faiss's native reader; by default its search
            structure is rebuilt from its embeddings (see [`RealmIndex.from_pretrained`]). Indexes this user saved
            always load their faiss file.
        top_k (`int`, *optional*, defaults to 1): Answers per question; `1` returns a dict, more a list of dicts.
        num_blocks (`int`, *optional*, defaults to `config.top_k`): Blocks retrieved and read per question.
        exclude_question_words (`bool`, *optional*, defaults to `True`): Leave out answers that only repeat words of
            the question ([`repeats_question`]); `False` ranks every span.
        answer_rule (`str`, *optional*, defaults to `config.answer_rule`): `"marginal"` (realm_hf's rule, above) or
            `"best_span"` (transformers' `RealmForOpenQA`: the single best span by retrieval + span score, its
            wordpieces decoded).
        batch_size (`int`, *optional*): Questions per forward pass when the input is a list (or a dataset).

    Call it with a question string, a `{"question": ...}` dict, a list of them, a dataset or a generator; the call
    takes `top_k`, `num_blocks`, `exclude_question_words`, `answer_rule` and `index` too (an index passed to a call is used for that
    call only).

    Returns:
        Per question, a dict (a list of `top_k` dicts when `top_k > 1`) with
        - `answer` (`str`): the answer, a substring of the block text (`"best_span"`: its decoded wordpieces;
          `None` when no block has a readable span);
        - `score` (`float`): `p(y | x)`, the answer's `p(z | x) · p(s | z, x)` summed over its spans in every
          retrieved block (see [`marginalize_answers`]);
        - `span_score` (`float`): `p(z | x) · p(s | z, x)` of its best span alone;
        - `block_id` (`int`), `title` (`str`): the block of its best span;
        - `evidence` (`str`): that block's text with the answer marked as `**answer**`;
        - `start`, `end` (`int`): character offsets of the answer in the block text;
        - `documents` (`list[dict]`): the retrieved blocks, best first, each `{"block_id", "title", "score", "text"}`
          with `score` = `p(z | x)` (softmax of the relevance over the retrieved blocks; with the reader's
          `span_normalization="global"`, of the relevance plus the logsumexp of the block's span scores).
    """

    _load_tokenizer = None  # the factory tries the model directory; __init__ explains what is missing
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False

    def __init__(
        self, model: RealmForOpenQA, tokenizer: Any = None, index: Any = None, check_fingerprint: bool = True,
        trust_index_file: bool = False, answer_rule: str | None = None, **kwargs: Any,
    ):
        if not isinstance(model, RealmForOpenQA):
            raise TypeError(
                f"The {OPEN_QA_TASK!r} pipeline needs a realm_hf RealmForOpenQA model, got {type(model).__name__}."
            )
        model_path = model.name_or_path or None
        revision = model_revision(model)
        if tokenizer is None:
            tokenizer = load_tokenizer_from([resolve_model_dir(model_path, revision=revision)], "RealmForOpenQA model")
        check_fast_tokenizer(tokenizer, type(self).__name__)
        self._answer_rule = check_answer_rule(
            answer_rule if answer_rule is not None else getattr(model.config, "answer_rule", "marginal")
        )
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)
        self.model.eval()
        # the index must be of this model's document tower, or the one recorded when fine-tuning started (with
        # shared towers the doc tower moves during fine-tuning while the index stays)
        self._accepted_fingerprints = (
            [fingerprint_module(model.retriever.document_embedder), *filter(None, [model.config.index_fingerprint])]
            if check_fingerprint
            else None
        )
        self._trust_index_file = bool(trust_index_file)
        self.index = load_index_for_model(
            model_path, model.config, index, model_revision=revision, trust_index_file=self._trust_index_file
        )
        check_index_fingerprint(
            self.index, self._accepted_fingerprints, index_source(index, model_path), FINGERPRINT_OPT_OUT
        )
        self._call_indexes: dict[str, Any] = {}

    # ----------------------------------------------------------------------------------------------- parameters
    def _sanitize_parameters(
        self, top_k=None, num_blocks=None, index=None, exclude_question_words=None, answer_rule=None, **unknown
    ):
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected arguments {sorted(unknown)}; it takes top_k, num_blocks, index, "
                "exclude_question_words, answer_rule (and batch_size, num_workers, device at construction)."
            )
        forward_params: dict[str, Any] = {}
        postprocess_params: dict[str, Any] = {}
        if answer_rule is not None:
            forward_params["answer_rule"] = postprocess_params["answer_rule"] = check_answer_rule(answer_rule)
        if top_k is not None:
            forward_params["top_k"] = postprocess_params["top_k"] = check_positive_int("top_k", top_k)
        if num_blocks is not None:
            forward_params["num_blocks"] = check_positive_int("num_blocks", num_blocks)
        if index is not None:
            forward_params["index"] = postprocess_params["index"] = index
        if exclude_question_words is not None:
            postprocess_params["exclude_question_words"] = bool(exclude_question_words)
        return {}, forward_params, postprocess_params

    def _resolve_index(self, index: Any) -> Any:
        resolved = resolve_call_index(  # checks dims
            index, self.index, self._call_indexes, config=self.model.config, trust_index_file=self._trust_index_file
        )
        if index is not None:
            check_index_fingerprint(resolved, self._accepted_fingerprints, index_source(index), FINGERPRINT_OPT_OUT)
        return resolved

    # --------------------------------------------------------------------------------------------------- call
    def __call__(self, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
        r"""
        Answer one question (`str` or `{"question": str}`) or a list / dataset / generator of them.

        Args:
            inputs: The question(s). `question=` is accepted as a keyword too.
            top_k (`int`, *optional*): Answers per question.
            num_blocks (`int`, *optional*): Blocks retrieved per question.
            exclude_question_words (`bool`, *optional*): Leave out answers that only repeat the question.
            index (*optional*): Another index (a `RealmIndex` or a directory) for this call.
            batch_size (`int`, *optional*): Questions per forward pass.
        """
        if inputs is None and "question" in kwargs:
            inputs = kwargs.pop("question")
        if kwargs.get("context") is not None:
            raise ValueError(
                f"The {OPEN_QA_TASK!r} pipeline retrieves its own evidence from the index and takes no `context`; "
                "pass only the question (or `index=` to search another corpus)."
            )
        kwargs.pop("context", None)
        inputs = check_batch(inputs, "question")
        if isinstance(inputs, list) and not inputs:
            return []
        return super().__call__(inputs, *args, **kwargs)

    def preprocess(self, inputs: Any) -> dict[str, torch.Tensor]:
        question = inputs["question"] if isinstance(inputs, dict) and "question" in inputs else inputs
        question = check_text(question, "question")
        return encode_query(self.tokenizer, question, self.model.config.retriever_config.query_max_length, "question")

    def _forward(
        self, model_inputs: dict[str, torch.Tensor], top_k: int = 1, num_blocks: int | None = None, index: Any = None,
        answer_rule: str | None = None,
    ) -> dict[str, torch.Tensor]:
        index = self._resolve_index(index)
        answer_rule = answer_rule or self._answer_rule
        input_ids = model_inputs["input_ids"]  # [B, Lq]
        attention_mask = model_inputs["attention_mask"]
        token_type_ids = model_inputs["token_type_ids"]
        batch_size = input_ids.shape[0]
        device = input_ids.device

        query_embeds = self.model.embed_queries(input_ids, attention_mask, token_type_ids)  # [B, D]
        k = min(num_blocks or self.model.config.top_k, len(index))
        _, block_ids = index.search(query_embeds.float().cpu(), k)  # [B, k]
        candidate_embeds = block_embeddings(index, block_ids)  # [B, k, D] from the index, as in fine-tuning
        columns = ["text"] if candidate_embeds is not None else ["text", "input_ids", "token_type_ids"]
        blocks = index.get_blocks(block_ids, columns=columns)

        if answer_rule == "best_span":  # as transformers' RealmForOpenQA built it
            reader = pair_reader_inputs(
                self.tokenizer, input_ids, attention_mask, blocks["text"], self.model.config.reader_config.max_length
            )
        else:
            reader = joined_reader_inputs(
                self.tokenizer, input_ids, attention_mask, blocks["text"], self.model.config.reader_config.max_length
            )
        if candidate_embeds is not None:
            candidates = {"candidate_embeds": candidate_embeds.to(device)}
        else:  # an index that keeps its embeddings out of reach (e.g. sharded): embed the blocks with the doc tower
            candidates = self._candidate_tokens(blocks, device)
        outputs = self.model(
            query_input_ids=input_ids,
            query_attention_mask=attention_mask,
            query_token_type_ids=token_type_ids,
            reader_input_ids=reader["input_ids"].to(device),
            reader_attention_mask=reader["attention_mask"].to(device),
            reader_token_type_ids=reader["token_type_ids"].to(device),
            **candidates,
        )
        span_logits = outputs.span_logits  # [B, k, S]
        joint = outputs.span_log_probs + outputs.block_log_probs.unsqueeze(-1)  # [B, k, S]
        valid = span_logits > torch.finfo(span_logits.dtype).min / 2
        if answer_rule == "marginal":  # answers are whole words; the old rule kept pieces of words, as it did
            valid &= whole_word_spans(
                reader["input_ids"].to(device), outputs.span_starts, outputs.span_ends, self._continuation_ids()
            )
        joint = joint.masked_fill(~valid, float("-inf")).view(batch_size, -1)  # [B, k*S]
        num_spans = span_logits.shape[-1]
        n = min(joint.shape[-1], max(_MIN_SPAN_CANDIDATES, 4 * top_k))
        scores, flat = joint.topk(n, dim=-1)  # [B, n]
        candidate = flat // num_spans  # [B, n]
        starts = outputs.span_starts[flat % num_spans]  # [B, n], positions in the joined sequence
        ends = outputs.span_ends[flat % num_spans]
        offsets = reader["offsets"].to(device)  # [B, k, L, 2]
        rows = torch.arange(batch_size, device=device).unsqueeze(-1)  # [B, 1]
        return {
            "answer_log_scores": scores,
            "answer_candidates": candidate,
            "answer_starts": starts,
            "answer_ends": ends,
            "answer_char_starts": offsets[rows, candidate, starts, 0],  # [B, n]
            "answer_char_ends": offsets[rows, candidate, ends, 1],  # [B, n]
            "question_ids": input_ids,  # [B, Lq], for the answer filter
            "block_ids": block_ids.to(device),  # [B, k]
            "block_log_probs": outputs.block_log_probs,  # [B, k]: the reader's p(z|x) (see span_normalization)
            "relevance_scores": outputs.relevance_scores,  # [B, k]
            "reader_input_ids": reader["input_ids"].to(device),  # [B, k, L], for the decoded answers of "best_span"
        }

    def _continuation_ids(self) -> torch.Tensor:
        """`[V]` bool: the wordpieces that continue a word (`##...`), computed once per tokenizer."""
        if getattr(self, "_continuations", None) is None:
            self._continuations = continuation_mask(self.tokenizer)
        return self._continuations

    def _candidate_tokens(self, blocks: dict[str, list], device: torch.device) -> dict[str, torch.Tensor]:
        from ..data.collators import pad_sequences

        flat_ids = [ids for row in blocks["input_ids"] for ids in row]
        flat_types = [types for row in blocks["token_type_ids"] for types in row]
        batch_size, k = len(blocks["input_ids"]), len(blocks["input_ids"][0])
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = pad_sequences(flat_ids, pad)  # [B*k, Lb]
        mask = pad_sequences([[1] * len(x) for x in flat_ids], 0, length=ids.shape[1])
        types = pad_sequences(flat_types, 0, length=ids.shape[1])
        shape = (batch_size, k, ids.shape[1])
        return {
            "candidate_input_ids": ids.view(shape).to(device),
            "candidate_attention_mask": mask.view(shape).to(device),
            "candidate_token_type_ids": types.view(shape).to(device),
        }

    def postprocess(
        self, model_outputs: dict[str, torch.Tensor], top_k: int = 1, index: Any = None,
        exclude_question_words: bool | None = None, answer_rule: str | None = None,
    ) -> Any:
        index = self._resolve_index(index)
        answer_rule = answer_rule or self._answer_rule
        if exclude_question_words is None:  # the old classes had no answer filter
            exclude_question_words = answer_rule == "marginal"
        block_ids = model_outputs["block_ids"][0].tolist()  # [k]
        prior = model_outputs["block_log_probs"][0].exp().tolist()  # [k]
        rows = index.get_blocks(block_ids, columns=["block_id", "title", "text"])
        documents = [
            {"block_id": int(block_id), "title": title, "score": float(p), "text": text}
            for block_id, title, text, p in zip(block_ids, rows["title"], rows["text"], prior)
        ]
        documents.sort(key=lambda doc: doc["score"], reverse=True)

        scores = model_outputs["answer_log_scores"][0].tolist()  # [n] log p(z|x) + log p(s|z,x), best first
        spans = []
        for i in range(len(scores)):
            candidate = int(model_outputs["answer_candidates"][0, i])
            char_start = int(model_outputs["answer_char_starts"][0, i])
            char_end = int(model_outputs["answer_char_ends"][0, i])
            text = rows["text"][candidate] or ""
            spans.append((candidate, char_start, char_end, text[char_start:char_end] if char_end > char_start else ""))
        if answer_rule == "best_span":  # each span on its own, best first, its wordpieces decoded
            ranked = [(None, float(torch.tensor(score).exp()), i) for i, score in enumerate(scores) if score > float("-inf")]
            reader_ids = model_outputs["reader_input_ids"][0]  # [k, L]
            for i, (candidate, char_start, char_end, _) in enumerate(spans):
                start, end = int(model_outputs["answer_starts"][0, i]), int(model_outputs["answer_ends"][0, i])
                spans[i] = (candidate, char_start, char_end, self.tokenizer.decode(reader_ids[candidate, start : end + 1]))
        else:
            ranked = marginalize_answers(scores, [span[3] for span in spans])
        if exclude_question_words:
            question = self.tokenizer.decode(model_outputs["question_ids"][0], skip_special_tokens=True)
            ranked = [answer for answer in ranked if not repeats_question(spans[answer[2]][3], question)] or ranked
        answers: list[dict[str, Any]] = []
        for _, probability, i in ranked[:top_k]:
            candidate, char_start, char_end, answer = spans[i]
            text = rows["text"][candidate] or ""
            answers.append(
                {
                    "answer": answer,
                    "score": probability,
                    "span_score": float(torch.tensor(scores[i]).exp()),
                    "block_id": int(block_ids[candidate]),
                    "title": rows["title"][candidate],
                    "evidence": f"{text[:char_start]}**{text[char_start:char_end]}**{text[char_end:]}",
                    "start": char_start,
                    "end": char_end,
                    "documents": documents,
                }
            )
        if not answers:
            answers.append(
                {"answer": None, "score": 0.0, "span_score": 0.0, "block_id": None, "title": None, "evidence": None, "start": None,
                 "end": None, "documents": documents}
            )
        return answers[0] if top_k == 1 else answers


def add_question_answering_hint() -> None:
    """Name this pipeline in the error transformers v5 raises for the removed task `"question-answering"`.

    transformers checks removed tasks (`REMOVED_TASKS`) before it looks at the model or at registered pipelines, so
    `pipeline("question-answering", model=realm_model)` cannot be routed here; the best we can do is a message that
    says where to go. Only the message text changes: the `KeyError` stays.
    """
    try:
        from transformers import pipelines as hf_pipelines
    except ImportError:  # pragma: no cover
        return
    removed = getattr(hf_pipelines, "REMOVED_TASKS", None)
    if not isinstance(removed, dict) or "question-answering" not in removed:
        return
    hint = (
        f" For a retrieval-augmented REALM model (realm_hf.RealmForOpenQA), use "
        f"`import realm_hf; pipeline({OPEN_QA_TASK_ALIAS!r}, model=...)`, which retrieves the evidence itself."
    )
    if OPEN_QA_TASK_ALIAS not in removed["question-answering"]:
        removed["question-answering"] = removed["question-answering"] + hint
