"""How REALM pre-training is doing: each step's retrieval figures (reading utility, the null document's mass), and on
held-out data masked-token accuracy of held-out sentences (with retrieval, with the null document alone, and reading
a given block alone), how the retriever ranks gold blocks, and zero-shot Recall@k of the retriever on QA pairs.
[`RealmPretrainer.evaluate`] reports the held-out ones."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import datasets
import torch

from ..data.qa_examples import load_qa_examples
from ..index import RealmIndex
from ..evaluation.answer_match import CorpusAnswerFinder
from ..evaluation.metrics import recall_at_k
from ..modeling import RealmRetriever

__all__ = [
    "current_candidate_embeds", "gold_blocks", "held_out_sentence_figures", "masked_token_hits",
    "scoring_with_index_embeddings", "step_retrieval_logs", "zero_shot_recall",
]


def step_retrieval_logs(out, null_index: int | None) -> dict[str, torch.Tensor]:
    """A training step's figures from the model's output `out` as detached 0-d tensors: the marginal log-likelihood
    and, with the null document at `null_index`, the reading utility of the top and of all retrieved blocks and the
    null document's prior and posterior mass. The loop reads them (`.item()`, a wait for the device) at its logging
    steps only, so the step does not wait for the forward pass before its backward pass is queued."""
    logs = {"log_likelihood": out.marginal_log_likelihood.detach().mean()}
    if null_index is not None:
        retrieved = [k for k in range(out.retrieval_log_probs.shape[1]) if k != null_index]
        prior = out.retrieval_log_probs[:, retrieved].detach()  # [B, K-1]
        top = prior.argmax(-1, keepdim=True)  # the retriever's favourite real document
        utility = out.retrieval_utility[:, retrieved].detach()  # [B, K-1]
        logs.update(
            {
                "ru_top": utility.gather(1, top).mean(),
                "ru_mean": utility.mean(),
                "null_prior_mass": out.retrieval_log_probs[:, null_index].detach().exp().mean(),
                "null_posterior_mass": out.posterior_log_probs[:, null_index].detach().exp().mean(),
            }
        )
    return logs


def held_out_sentence_figures(
    model: torch.nn.Module,
    examples: datasets.Dataset,
    batch_size: int,
    x_is_z: bool,
    num_retrieved: int,
    retrieve: Callable[[list[dict]], tuple[dict, int | None]],
    read_alone: Callable[[list[dict], torch.Tensor], dict],
) -> dict[str, float]:
    r"""
    The figures of [`RealmPretrainer.evaluate_sentences`] (see there) for `examples`, in batches of `batch_size`.

    Args:
        model: The retriever + encoder (`RealmPretrainingModel`), in eval mode.
        x_is_z (`bool`): Whether the sentences come from the knowledge corpus itself (they have a `source_block_id`).
        num_retrieved (`int`): Blocks retrieved per sentence (K, less the null document).
        retrieve (`Callable`): A list of examples -> their candidate batch (on the model's device) and the position
            of the null document among the candidates (None without one).
        read_alone (`Callable`): A list of examples and block ids `[B, 1]` -> the batch with that block as the only
            candidate of each example.
    """
    has_gold = "gold_block_id" in examples.column_names
    # X = Z without gold blocks (real corpora): reading is measured on each sentence's own block, which retrieval
    # excludes; it holds the masked span word for word, so this is the reading warm-up's task on held-out sentences
    reads_source = not has_gold and x_is_z and "source_block_id" in examples.column_names
    sums: dict[str, float] = defaultdict(float)
    total_tokens = 0
    rows = list(examples)
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        batch, null_index = retrieve(chunk)
        out = model(batch, null_candidate_index=null_index)
        correct_with, correct_null, tokens = masked_token_hits(out, batch["labels"], null_index)
        sums["with"] += correct_with
        sums["null"] += correct_null
        total_tokens += tokens
        if has_gold:
            gold = gold_blocks(chunk)  # [B, G]
            retrieved = batch["candidate_block_ids"].cpu()  # [B, K] (-1 for ∅)
            is_gold = (retrieved[:, :, None] == gold[:, None, :]).any(-1)  # [B, K]
            prior = out.retrieval_log_probs.exp().cpu()  # [B, K]
            posterior = out.posterior_log_probs.exp().cpu()  # [B, K]
            sums["gold_prior_mass"] += (prior * is_gold).sum().item()
            sums["gold_posterior_mass"] += (posterior * is_gold).sum().item()
            sums["gold_retrieved"] += is_gold.any(-1).sum().item()
            first = prior.masked_fill(retrieved < 0, -1.0).argmax(-1, keepdim=True)  # [B, 1]: the top retrieved block
            sums["gold_top1"] += is_gold.gather(1, first).sum().item()
        if has_gold or reads_source:  # reading alone: the gold (or source) block as the only candidate
            column = "gold_block_id" if has_gold else "source_block_id"
            only = torch.tensor([[int(row[column])] for row in chunk])  # [B, 1]
            reading_batch = read_alone(chunk, only)
            reading_out = model(reading_batch, score_candidates=False)
            sums["reading"] += masked_token_hits(reading_out, reading_batch["labels"], None)[0]
    results = {"mlm_accuracy_with_retrieval": 100.0 * sums["with"] / max(total_tokens, 1)}
    if null_index is not None:
        results["mlm_accuracy_null_document"] = 100.0 * sums["null"] / max(total_tokens, 1)
    if has_gold:
        count = max(len(rows), 1)
        results.update(
            {
                "gold_top1": sums["gold_top1"] / count,
                f"gold_top{num_retrieved}": sums["gold_retrieved"] / count,
                "gold_prior_mass": sums["gold_prior_mass"] / count,
                "gold_posterior_mass": sums["gold_posterior_mass"] / count,
                "mlm_accuracy_gold_document": 100.0 * sums["reading"] / max(total_tokens, 1),
            }
        )
    elif reads_source:
        results["mlm_accuracy_source_block"] = 100.0 * sums["reading"] / max(total_tokens, 1)
    return results


def current_candidate_embeds(
    batch: dict, index: RealmIndex, null_index: int | None, null_embed: Callable[[dict, int], torch.Tensor]
) -> torch.Tensor | None:
    """The document embeddings of a candidate batch's candidates, `[B, K, D]`, from an `index` the retriever's current
    document tower has just built (so they are what the tower would compute); ∅'s, which no index holds, from
    `null_embed(batch, null_index)` `[1, D]` (every row's ∅ is the same empty block). None when a candidate other
    than ∅ has no block id (the caller embeds the candidates then)."""
    block_ids = batch["candidate_block_ids"].cpu()  # [B, K], -1 for ∅
    is_null = torch.zeros_like(block_ids, dtype=torch.bool)
    if null_index is not None:
        is_null[:, null_index] = True
    if bool((block_ids[~is_null] < 0).any()) or bool(is_null.all()):
        return None
    embeds = index.get_embeddings(block_ids.masked_fill(is_null, block_ids[~is_null][0]))  # [B, K, D] (∅: a stand-in)
    if null_index is not None:
        embeds[:, null_index] = null_embed(batch, null_index)
    return embeds.to(batch["query_input_ids"].device)


def scoring_with_index_embeddings(
    retrieve: Callable[[list[dict]], tuple[dict, int | None]], retriever: RealmRetriever, index: RealmIndex
) -> Callable[[list[dict]], tuple[dict, int | None]]:
    """`retrieve` (examples -> candidate batch from `index`, position of ∅), its batches carrying the candidates'
    embeddings from `index` ([`current_candidate_embeds`]), for an `index` the retriever's current document tower has
    just built: the model scores them without running the tower again. An index that cannot give back its stored
    embeddings (a sharded one: each rank holds part of them) leaves `retrieve` as it is."""
    if not hasattr(index, "get_embeddings"):
        return retrieve
    embedded_null: list[torch.Tensor] = []  # ∅'s embedding, computed by the tower at the first batch that has ∅

    def null_embed(batch: dict, null_index: int) -> torch.Tensor:
        if not embedded_null:
            columns = ("input_ids", "attention_mask", "token_type_ids")
            empty = {name: batch[f"candidate_{name}"][:1, null_index] for name in columns}  # [1, L] each
            embedded_null.append(retriever.embed_documents(**empty).float().cpu())  # [1, D]
        return embedded_null[0]

    def retrieve_with_embeddings(chunk: list[dict]) -> tuple[dict, int | None]:
        batch, null_index = retrieve(chunk)
        batch["candidate_embeds"] = current_candidate_embeds(batch, index, null_index, null_embed)
        return batch, null_index

    return retrieve_with_embeddings


def gold_blocks(rows: list[dict]) -> torch.Tensor:
    """The gold blocks of each row, `[B, G]`: `gold_block_id` and, when the rows have them, the `gold_block_ids` that
    count as gold as well (other blocks stating the same fact), padded with -2 (never a block, nor ∅'s -1)."""
    per_row = [[int(row["gold_block_id"]), *(int(b) for b in row.get("gold_block_ids") or ())] for row in rows]
    width = max(len(blocks) for blocks in per_row)
    return torch.tensor([blocks + [-2] * (width - len(blocks)) for blocks in per_row], dtype=torch.long)


def masked_token_hits(out, labels: torch.Tensor, null_index: int | None) -> tuple[int, int, int]:
    """Masked tokens predicted right by the marginal over the candidates and by the null document alone, and the
    number of masked tokens, of one batch."""
    positions = out.masked_positions  # [M, 3] (b, k, l)
    log_probs = torch.log_softmax(out.masked_token_logits.float(), -1)  # [M, V]
    targets = labels[positions[:, 0], positions[:, 2]]  # [M]
    weights = out.retrieval_log_probs[positions[:, 0], positions[:, 1]]  # [M]
    num_candidates = out.retrieval_log_probs.shape[1]
    correct_with = correct_null = total = 0
    for b in range(labels.shape[0]):
        rows = positions[:, 0] == b
        per_candidate = (log_probs[rows] + weights[rows, None]).view(num_candidates, -1, log_probs.shape[1])  # [K, n_b, V]
        gold = targets[rows].view(num_candidates, -1)[0]  # [n_b]
        correct_with += (torch.logsumexp(per_candidate, 0).argmax(-1) == gold).sum().item()
        if null_index is not None:
            correct_null += (per_candidate[null_index].argmax(-1) == gold).sum().item()
        total += gold.numel()
    return correct_with, correct_null, total


def zero_shot_recall(
    retriever: RealmRetriever, tokenizer, index: RealmIndex, qa_file: str, max_questions: int, max_length: int,
    device: torch.device, k: int = 5, batch_size: int = 32, answer_finder: CorpusAnswerFinder | None = None,
) -> float:
    """Recall@k of a retriever on the first `max_questions` questions of a QA JSONL (`question`, `answers`,
    `answer_format`): an answer in the top-k blocks. With `answer_finder`, the first `max_questions` questions whose
    answer occurs somewhere in its corpus (the others no retriever can find)."""
    rows = []
    for row in load_qa_examples(qa_file):  # a file, or a slice of one: nq-dev.jsonl[1000:1500]
        if len(rows) == max_questions:
            break
        if answer_finder is None or answer_finder.has_answer(row["answers"], row.get("answer_format", "text")):
            rows.append(row)
    if not rows:
        raise ValueError(f"No question of {qa_file} has an answer in the knowledge corpus; use a larger corpus.")
    retrieved, references, formats = [], [], []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        encoded = tokenizer(
            [r["question"] for r in chunk], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        ).to(device)
        embeds = retriever.embed_queries(encoded["input_ids"], encoded["attention_mask"], encoded.get("token_type_ids"))
        _, ids = index.search(embeds.float().cpu(), k)
        texts = index.get_blocks(ids, columns=["title", "text"])
        retrieved += [[f"{t} {x}" for t, x in zip(titles, bodies)] for titles, bodies in zip(texts["title"], texts["text"])]
        references += [r["answers"] for r in chunk]
        formats += [r.get("answer_format", "text") for r in chunk]
    return recall_at_k(retrieved, references, k, answer_formats=formats)
