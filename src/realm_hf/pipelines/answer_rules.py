"""The two answer rules of the Open-QA pipeline (`RealmForOpenQAConfig.answer_rule`).

`"marginal"`, realm_hf's: answers ranked by `p(y | x)` summed over the spans of the same text ([`marginalize_answers`]),
answers that only repeat the question left out ([`repeats_question`]), over the question's own wordpieces joined
with each block's ([`joined_reader_inputs`]). `"best_span"`, transformers' `RealmForOpenQA`:
the reader reads the question and each block as a tokenizer pair ([`pair_reader_inputs`]) and the single best span
is the answer, its wordpieces decoded.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..configuration import ANSWER_RULES
from ..data.answers import normalize_answer

__all__ = [
    "answer_key", "check_answer_rule", "continuation_mask", "joined_reader_inputs", "marginalize_answers",
    "pair_reader_inputs", "repeats_question", "whole_word_spans",
]


def check_answer_rule(answer_rule: Any) -> str:
    """`answer_rule`, refused in one line unless it is one of [`ANSWER_RULES`]."""
    if answer_rule not in ANSWER_RULES:
        raise ValueError(
            f"answer_rule={answer_rule!r} is not one of {ANSWER_RULES}: 'marginal' (realm_hf's rule) or 'best_span' "
            "(the rule of transformers' RealmForOpenQA, the default of converted checkpoints)."
        )
    return answer_rule


def answer_key(text: str) -> str:
    """What makes two spans the same answer: their text as exact match compares it (SQuAD's `normalize_answer`:
    lowercased, punctuation and the articles a / an / the removed, whitespace collapsed), so "The Nile", "Nile" and
    "nile." add up; a span with nothing left ("The") is no answer."""
    return normalize_answer(text)


# function words an answer may share with its question ("the United States" in "... president of the united states")
_FUNCTION_WORDS = frozenset(
    "a an and are as at be by did do does for from how in is it its of on or the to was were what when where which who "
    "whom whose why with".split()
)


def _content_words(text: str) -> set[str]:
    """Lowercased `\\w+` words of `text` minus function words, a plural `-s` dropped ("Penicillins" -> "penicillin")."""
    words = (word for word in re.findall(r"\w+", text.lower()) if word not in _FUNCTION_WORDS)
    return {word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word for word in words}


def repeats_question(answer: str, question: str) -> bool:
    r"""
    Whether `answer` only repeats words of `question`: every content word of the answer (lowercased, function words
    such as "the" or "of" ignored, a plural `-s` dropped) occurs in the question; an answer with no content word
    repeats it too. "Cairo" and "the United States" repeat "which river flows through cairo" and "who was the first
    president of the united states"; "Nile", "George Washington" and "Atlantic Ocean" (for "which is the largest
    ocean") do not.

    Args:
        answer (`str`): A candidate answer.
        question (`str`): The question asked.

    Returns:
        `bool`: `True` for an answer the pipeline leaves out when `exclude_question_words` is on.
    """
    return _content_words(answer) <= _content_words(question)


def marginalize_answers(log_scores: list[float], texts: list[str]) -> list[tuple[str, float, int]]:
    r"""
    Answers ranked by marginal probability: `p(y | x) = Σ_{spans i with answer_key(texts[i]) = y} exp(log_scores[i])`,
    where `log_scores[i] = log p(z_i | x) + log p(s_i | z_i, x)` (REALM's Open-QA `Σ_z p(z|x) p(y|z,x)`).

    Args:
        log_scores (`list[float]`): Joint log-probabilities of candidate spans (`-inf` for none).
        texts (`list[str]`): Their answer texts (empty for a span with no text).

    Returns:
        `list[(key, probability, best)]`, best answer first (ties: the one whose best span comes first): the answer key,
        `p(y | x)` summed over its spans, and the position of its best span (its provenance).
    """
    totals: dict[str, list[float]] = {}
    best: dict[str, int] = {}
    for i, (log_score, text) in enumerate(zip(log_scores, texts)):
        key = answer_key(text)
        if not key or log_score == float("-inf"):
            continue
        totals.setdefault(key, []).append(log_score)
        if key not in best or log_score > log_scores[best[key]]:
            best[key] = i
    ranked = [(key, float(torch.tensor(scores).logsumexp(0).exp()), best[key]) for key, scores in totals.items()]
    ranked.sort(key=lambda item: (-item[1], item[2]))
    return ranked


def pair_reader_inputs(
    tokenizer: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, texts: list[list[str]], max_length: int
) -> dict[str, torch.Tensor]:
    """The reader input of transformers' `RealmRetriever`: the question decoded from its wordpieces and each block
    text tokenized as a pair, truncated longest first to the reader's `max_length`, padded to the longest;
    `[B, k, L]`, with the character offsets of each block wordpiece in its block text ((0, 0) elsewhere)."""
    num_blocks = len(texts[0])
    questions = [
        tokenizer.decode(input_ids[b, : int(attention_mask[b].sum())], skip_special_tokens=True)
        for b in range(len(texts))
    ]
    encoded = tokenizer(
        [question for question in questions for _ in range(num_blocks)],
        [text or "" for row in texts for text in row],
        truncation="longest_first", max_length=max_length, padding=True, return_offsets_mapping=True,
        return_tensors="pt", verbose=False,
    )
    offsets = encoded["offset_mapping"]  # [B*k, L, 2]
    for row in range(offsets.shape[0]):
        in_block = torch.tensor([sequence == 1 for sequence in encoded.sequence_ids(row)])
        offsets[row][~in_block] = 0
    shape = (len(texts), num_blocks, encoded["input_ids"].shape[-1])
    return {
        "input_ids": encoded["input_ids"].view(shape),
        "token_type_ids": encoded["token_type_ids"].view(shape),
        "attention_mask": encoded["attention_mask"].view(shape),
        "offsets": offsets.view(*shape, 2),
    }


def joined_reader_inputs(
    tokenizer: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, texts: list[list[str]], max_length: int
) -> dict[str, torch.Tensor]:
    """The reader input of realm_hf's rule: the question's own wordpieces, then each block's, cut to fit,
    `[CLS] question [SEP] body [SEP]` `[B, k, L]`, with the character offsets of each body wordpiece."""
    sep = tokenizer.sep_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    flat_texts = [text or "" for row in texts for text in row]
    encoded = tokenizer(flat_texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    sequences, types, offsets = [], [], []
    num_blocks = len(texts[0])
    for b in range(len(texts)):
        question = input_ids[b, : int(attention_mask[b].sum())].tolist()  # [CLS] question [SEP]
        room = max_length - len(question) - 1
        if room < 1:
            raise ValueError(
                f"A question of {len(question)} wordpieces leaves no room for a block in the reader's "
                f"max_length={max_length}; shorten the question or lower retriever_config.query_max_length."
            )
        for j in range(num_blocks):
            body = encoded["input_ids"][b * num_blocks + j][:room]
            body_offsets = encoded["offset_mapping"][b * num_blocks + j][:room]
            sequences.append(question + body + [sep])
            types.append([0] * len(question) + [1] * (len(body) + 1))
            offsets.append([(0, 0)] * len(question) + [tuple(o) for o in body_offsets] + [(0, 0)])
    length = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), length), pad, dtype=torch.long)
    type_ids = torch.zeros((len(sequences), length), dtype=torch.long)
    mask = torch.zeros((len(sequences), length), dtype=torch.long)
    offset_tensor = torch.zeros((len(sequences), length, 2), dtype=torch.long)
    for row, (sequence, sequence_types, sequence_offsets) in enumerate(zip(sequences, types, offsets)):
        ids[row, : len(sequence)] = torch.tensor(sequence)
        type_ids[row, : len(sequence)] = torch.tensor(sequence_types)
        mask[row, : len(sequence)] = 1
        offset_tensor[row, : len(sequence)] = torch.tensor(sequence_offsets)
    shape = (len(texts), num_blocks, length)
    return {
        "input_ids": ids.view(shape),
        "token_type_ids": type_ids.view(shape),
        "attention_mask": mask.view(shape),
        "offsets": offset_tensor.view(*shape, 2),
    }


def continuation_mask(tokenizer: Any) -> torch.Tensor:
    """`[V]` bool: True for the wordpieces that continue a word (WordPiece's `##` prefix)."""
    vocab = tokenizer.get_vocab()
    mask = torch.zeros(max(len(tokenizer), max(vocab.values()) + 1), dtype=torch.bool)
    for token, token_id in vocab.items():
        if token.startswith("##"):
            mask[token_id] = True
    return mask


def whole_word_spans(
    input_ids: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, continuations: torch.Tensor
) -> torch.Tensor:
    r"""
    Which spans are whole words: their first wordpiece begins a word and the wordpiece after their last does not
    continue it.

    Args:
        input_ids (`torch.LongTensor` of shape `(B, K, L)`): The reader's input.
        starts, ends (`torch.LongTensor` of shape `(S,)`): The spans' first and last positions.
        continuations (`torch.BoolTensor` of shape `(V,)`): [`continuation_mask`] of the tokenizer.

    Returns:
        `torch.BoolTensor` of shape `(B, K, S)`.
    """
    continues = continuations.to(input_ids.device)[input_ids]  # [B, K, L]
    after = torch.cat([continues[..., 1:], torch.zeros_like(continues[..., :1])], dim=-1)  # [B, K, L]: next continues
    return ~continues[..., starts] & ~after[..., ends]
