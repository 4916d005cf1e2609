"""REALM's formulas computed by hand from the raw outputs of the models' networks (BERT states, the heads' weights),
with plain tensor arithmetic: no helper of realm_hf's (`marginalize_over_candidates`, the output fields, the span
enumeration). The math tests compare the models against these, so that a wrong formula in the package cannot be
"confirmed" by its own intermediates."""

from __future__ import annotations

import torch


def log_normalize(logits: torch.Tensor) -> torch.Tensor:
    """`logits - log Σ exp(logits)` over the last dimension, with the maximum taken out by hand."""
    top = logits.max(-1, keepdim=True).values
    return logits - (top + (logits - top).exp().sum(-1, keepdim=True).log())


def log_sum_exp(values: list[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """`log Σ exp(v)` of a list of 0-dim tensors (or a 1-dim tensor)."""
    values = torch.stack(list(values)) if isinstance(values, list) else values
    top = values.max()
    return top + (values - top).exp().sum().log()


def candidate_log_likelihoods(encoder, input_ids, labels, attention_mask=None, token_type_ids=None) -> torch.Tensor:
    """`log p(y | z_k, x) = Σ_j log p(y_j | z_k, x)` `[B, K]` from the encoder's BERT states and its MLM head at EVERY
    position (vocabulary logits `[L, V]` per candidate), normalized here; `labels` `[B, L]`, -100 where not predicted."""
    batch_size, num_candidates, seq_length = input_ids.shape
    out = torch.zeros(batch_size, num_candidates, dtype=torch.float64)
    for b in range(batch_size):
        for k in range(num_candidates):
            hidden = encoder.bert(
                input_ids=input_ids[b, k][None],
                attention_mask=None if attention_mask is None else attention_mask[b, k][None],
                token_type_ids=None if token_type_ids is None else token_type_ids[b, k][None],
            ).last_hidden_state[0]  # [L, H]
            log_probs = log_normalize(encoder.mlm_head(hidden).double())  # [L, V]
            out[b, k] = sum(log_probs[j, int(labels[b, j])] for j in range(seq_length) if labels[b, j] != -100)
    return out


def marginal_log_likelihood(candidate_log_likelihood: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """`log Σ_k p(y | z_k, x) p(z_k | x)` `[B]`, p(z|x) the softmax of the scores."""
    prior = log_normalize(scores.double())
    return torch.stack([log_sum_exp(candidate_log_likelihood[b].double() + prior[b]) for b in range(len(scores))])


def prior_and_posterior(candidate_log_likelihood: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`p(z | x) = exp f / Σ exp f` and `p(z | y, x) = p(y | z, x) p(z | x) / Σ_z' p(y | z', x) p(z' | x)`, `[B, K]`."""
    log_prior = log_normalize(scores.double())
    log_joint = candidate_log_likelihood.double() + log_prior
    return log_prior.exp(), log_normalize(log_joint).exp()


def block_positions(token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[int]:
    """The positions of the block in `[CLS] question [SEP] block [SEP]` (one sequence): token type 1, attended, and
    not the final [SEP] (the last attended position)."""
    attended = [p for p in range(len(attention_mask)) if attention_mask[p] == 1]
    return [p for p in attended if token_type_ids[p] == 1 and p != attended[-1]]


def span_scores(reader, input_ids, attention_mask, token_type_ids, max_span_width: int) -> list[dict]:
    """For one question's K joined sequences `[K, L]`: per candidate, {(start, end): score} over exactly the spans
    inside its block of at most `max_span_width` wordpieces, `score = MLP([h_start; h_end])` written out from the
    span scorer's weights (its first layer acts on the concatenation: its two halves are the start and end maps)."""
    scorer = reader.span_scorer
    weight, bias = scorer.dense_intermediate.weight, scorer.dense_intermediate.bias  # [2P, H], [2P]
    half = weight.shape[0] // 2
    concat_weight = torch.cat([weight[:half], weight[half:]], dim=1)  # [P, 2H]: acts on [h_start; h_end]
    concat_bias = bias[:half] + bias[half:]  # [P]
    norm = scorer.layer_norm
    out = []
    for k in range(input_ids.shape[0]):
        hidden = reader.bert(
            input_ids=input_ids[k][None], attention_mask=attention_mask[k][None], token_type_ids=token_type_ids[k][None]
        ).last_hidden_state[0]  # [L, H]
        positions = set(block_positions(token_type_ids[k], attention_mask[k]))
        scores = {}
        for start in sorted(positions):
            for end in range(start, start + max_span_width):
                if end not in positions:
                    continue
                layer = torch.relu(concat_weight @ torch.cat([hidden[start], hidden[end]]) + concat_bias)  # [P]
                centered = layer - layer.mean()
                normed = centered / (centered.pow(2).mean() + norm.eps).sqrt() * norm.weight + norm.bias
                scores[(start, end)] = (scorer.dense_output.weight[0] @ normed + scorer.dense_output.bias[0]).double()
        out.append(scores)
    return out


def span_log_probs(scores: dict) -> dict:
    """`log p(s | z, x)`: the softmax over exactly the given (valid) spans of one block."""
    normalizer = log_sum_exp(list(scores.values()))
    return {span: score - normalizer for span, score in scores.items()}
