"""Side-by-side speed of the realm_hf models, the old transformers-REALM classes and a bare `BertModel`.

Command (full run, about 20 minutes on 2 CPU cores; writes benchmarks/results/models.{json,md,log}):

    HF_HUB_OFFLINE=1 nohup .venv/bin/python benchmarks/bench_models.py > benchmarks/results/models.log 2>&1 &

The full run ends with the REALM step on padded batches of real lengths (``--padded-step`` runs only that, about
3 minutes, and updates the ``real_token_step`` part of models.json): today's fp32 step, bf16 autocast, length
buckets, and a bare ``BertModel`` over the same padded tensors, in real (non-pad) tokens/s.

On a GPU (about 5 minutes on an H100; writes benchmarks/results/models-gpu.{json,md}; more warm-up steps and
repeats per worker, timings synchronized with the GPU; REALM_OLD_PYTHON names the interpreter of the old classes):

    HF_HUB_OFFLINE=1 REALM_OLD_PYTHON=/path/to/oldrealm-venv/bin/python .venv/bin/python benchmarks/bench_models.py \
        --device cuda --rounds 2

Smoke run (about 5 minutes; writes benchmarks/results/models-quick.{json,md}):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_models.py --quick

What is timed (MiniLM-size BERTs: 6 layers, hidden 384, 12 heads, intermediate 1536, vocab 30522, gelu, random
weights, fp32, `torch.set_num_threads(2)`):

- ``train_L{L}``: one pre-training step, forward + backward, B=2 masked sentences (query length 32, 5 masked
  positions each), K=8 candidate blocks of length L, joined sequences `[CLS] x [SEP] z [SEP]` of length L.
  realm_hf: `RealmRetriever` scores -> `RealmKnowledgeEncoder(relevance_scores, labels)` -> `loss.backward()`.
  old: `RealmScorer` -> `RealmKnowledgeAugEncoder(relevance_score, labels, mlm_mask)` -> `loss.backward()`.
  bare BERT: two `BertModel`s (encoder, retriever tower) forward + backward of `sum(last_hidden_state)` over the
  same tokens: B*K joined sequences of length L, B*K blocks of length L and B queries of length 32, i.e.
  `2*B*K*L + 32*B` tokens. tokens/s of all three use this count.
- ``openqa_B32``: inference (`torch.no_grad`) for 32 questions x top-5 blocks, reader length 288, query length 32,
  candidate embeddings [32, 5, 128] as if from the index. realm_hf: one `RealmForOpenQA` call on the batch. old:
  the old `RealmForOpenQA` accepts one question at a time, so its per-question work (its `embedder` on the
  question, the 5 relevance scores, its `reader` on the 5 joined sequences) is looped 32 times; its in-memory
  search and tokenization are left out (which favours the old class). bare BERT: one `BertModel` forward over the
  160 reader sequences plus one over the 32 questions. Tokens: `32*5*288 + 32*32`.

The old classes live in another virtualenv (transformers 4.57.6), so every measurement runs in a fresh worker
process: `--worker old` under /work/oldrealm-venv/bin/python (or $REALM_OLD_PYTHON), `--worker new` (realm_hf and
bare BERT, step by step interleaved) under this interpreter. One worker invocation times one case (warm-up steps, then
timed repeats); for each case the invocations alternate old, new, and `--rounds` rounds repeat that, so load from
other processes on a shared machine falls on both sides alike. Medians (and minimums) are over all repeats of all
rounds. Inputs come from fixed-seed `torch.Generator`s (same torch version in both venvs); every worker reports a
fingerprint of its inputs and the driver checks they agree.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from bench_common import RESULTS as RESULTS_DIR, cpu_model, device_name, synchronize

logger = logging.getLogger("bench_models")

OLD_PYTHON = os.environ.get("REALM_OLD_PYTHON", "/work/oldrealm-venv/bin/python")  # transformers 4.57.6 venv
DEVICE = torch.device("cpu")  # where the workers time the models (`--device`); inputs are made on the CPU first
RESULTS = Path(RESULTS_DIR)
BERT = dict(
    vocab_size=30522,
    hidden_size=384,
    num_hidden_layers=6,
    num_attention_heads=12,
    intermediate_size=1536,
    hidden_act="gelu",  # MiniLM's; the old RealmConfig defaults to gelu_new, so both are set explicitly
    max_position_embeddings=512,
)
B, K, QUERY_LEN, NUM_MASKED, TITLE_LEN = 2, 8, 32, 5, 12
QA_BATCH, QA_TOP_K, QA_LEN, PROJ = 32, 5, 288, 128
CLS, SEP, MASK = 101, 102, 103

CASES = {"train_L128": 128, "train_L288": 288, "openqa_B32": None}  # case -> joined length (None: Open-QA)
# Per case: warm-up steps and timed repeats in each worker invocation; `rounds` alternating old/new invocations.
FULL = dict(rounds=3, warmup={"train_L128": 1, "train_L288": 1, "openqa_B32": 1},
            repeats={"train_L128": 2, "train_L288": 1, "openqa_B32": 1})
# On a GPU a step takes milliseconds: more warm-up (kernel selection, allocator) and more repeats per invocation.
GPU = dict(rounds=3, warmup={case: 5 for case in CASES}, repeats={case: 20 for case in CASES})
QUICK = dict(rounds=1, warmup={"train_L128": 1, "train_L288": 0, "openqa_B32": 0},
             repeats={"train_L128": 1, "train_L288": 1, "openqa_B32": 1})


# ----------------------------------------------------------------------------------------------------- device
def on_device(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inputs (made on the CPU from seeded generators, identical everywhere) moved to `DEVICE`."""
    return {name: tensor.to(DEVICE) for name, tensor in inputs.items()}


# ----------------------------------------------------------------------------------------------------- inputs
def _random_ids(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randint(1000, 30000, shape, generator=generator)


def make_query(generator: torch.Generator, batch: int) -> torch.Tensor:
    query = _random_ids(generator, batch, QUERY_LEN)  # [B, 32]
    query[:, 0], query[:, -1] = CLS, SEP
    return query


def pretrain_inputs(seq_len: int) -> dict[str, torch.Tensor]:
    """Masked sentences, candidate blocks and joined sequences; no padding (all masks are ones)."""
    g = torch.Generator().manual_seed(seq_len)
    query = make_query(g, B)  # [B, 32]
    labels = torch.full((B, seq_len), -100)  # [B, L]: the sentence comes first in every joined sequence
    for b in range(B):
        positions = 1 + torch.randperm(QUERY_LEN - 2, generator=g)[:NUM_MASKED]
        labels[b, positions] = query[b, positions]
        query[b, positions] = MASK
    blocks = _random_ids(g, B, K, seq_len)  # [B, K, L]: [CLS] title [SEP] body [SEP]
    blocks[..., 0], blocks[..., TITLE_LEN - 1], blocks[..., -1] = CLS, SEP, SEP
    block_types = torch.zeros_like(blocks)
    block_types[..., TITLE_LEN:] = 1
    body = blocks[..., TITLE_LEN : TITLE_LEN + seq_len - QUERY_LEN]
    joined = torch.cat([query.unsqueeze(1).expand(-1, K, -1), body], dim=-1)  # [B, K, L]
    joined[..., -1] = SEP
    joined_types = torch.zeros_like(joined)
    joined_types[..., QUERY_LEN:] = 1
    return dict(query=query, query_types=torch.zeros_like(query), blocks=blocks, block_types=block_types,
                joined=joined, joined_types=joined_types, labels=labels)


def openqa_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    query = make_query(g, QA_BATCH)  # [Q, 32]
    reader = _random_ids(g, QA_BATCH, QA_TOP_K, QA_LEN)  # [Q, 5, 288]: [CLS] question [SEP] block [SEP]
    reader[..., :QUERY_LEN] = query.unsqueeze(1)
    reader[..., -1] = SEP
    reader_types = torch.zeros_like(reader)
    reader_types[..., QUERY_LEN:] = 1
    block_mask = reader_types.bool().clone()
    block_mask[..., -1] = False  # the final [SEP] (what the old class derives from special_tokens_mask)
    candidate_embeds = torch.randn(QA_BATCH, QA_TOP_K, PROJ, generator=g)  # [Q, 5, 128] "from the index"
    return dict(query=query, query_types=torch.zeros_like(query), reader=reader, reader_types=reader_types,
                block_mask=block_mask, candidate_embeds=candidate_embeds)


def fingerprint(inputs: dict[str, torch.Tensor]) -> float:
    return float(sum((t.cpu().double().flatten() * torch.arange(t.numel(), dtype=torch.float64).remainder(97)).sum()
                     for _, t in sorted(inputs.items())))


def ones(t: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(t)


def pretrain_tokens(seq_len: int) -> int:
    return 2 * B * K * seq_len + B * QUERY_LEN


OPENQA_TOKENS = QA_BATCH * QA_TOP_K * QA_LEN + QA_BATCH * QUERY_LEN


# ---------------------------------------------------------------------------------- the padded step (issue 13)
# Lengths of real blocks: wiki-2015, first 100 articles of shard 0, block_length 288 (2,032 blocks): percentiles
# 10/25/50/75/90 = 245/261/273/281/286 wordpieces, mean 264. Masked sentences: 12-32 wordpieces.
BLOCK_LENGTH_PERCENTILES = ((0.0, 120), (0.10, 245), (0.25, 261), (0.50, 273), (0.75, 281), (0.90, 286), (1.0, 288))
PADDED_B = 4  # four masked sentences, K = 8 candidates each (the null document first)
PADDED_LENGTH_BUCKETS = 2  # the null documents apart from the blocks (`length_bucket_groups` cuts there first)


def _real_block_lengths(generator: torch.Generator, count: int) -> list[int]:
    """Block lengths drawn from the wiki-2015 percentiles above (linear between them)."""
    lengths = []
    for u in torch.rand(count, generator=generator).tolist():
        for (p0, l0), (p1, l1) in zip(BLOCK_LENGTH_PERCENTILES, BLOCK_LENGTH_PERCENTILES[1:]):
            if u <= p1:
                lengths.append(round(l0 + (l1 - l0) * (u - p0) / (p1 - p0)))
                break
    return lengths


def padded_pretrain_inputs(seq_len: int = 288) -> dict[str, torch.Tensor]:
    """A REALM batch as the collator pads it: per sentence the null document (an empty block; joined = the sentence
    alone) and K-1 blocks of real lengths; every tensor right-padded to the batch's longest row."""
    g = torch.Generator().manual_seed(seq_len + 1)
    query_lengths = torch.randint(12, QUERY_LEN + 1, (PADDED_B,), generator=g).tolist()
    query = torch.zeros(PADDED_B, QUERY_LEN, dtype=torch.long)
    labels = torch.full((PADDED_B, seq_len), -100)
    for b, length in enumerate(query_lengths):
        query[b, :length] = _random_ids(g, length)
        query[b, 0], query[b, length - 1] = CLS, SEP
        position = 1 + int(torch.randint(0, length - 2, (1,), generator=g))
        labels[b, position], query[b, position] = query[b, position], MASK
    block_lengths = [[2] + _real_block_lengths(g, K - 1) for _ in range(PADDED_B)]  # ∅ = [CLS] [SEP]
    blocks = torch.zeros(PADDED_B, K, seq_len, dtype=torch.long)
    joined = torch.zeros(PADDED_B, K, seq_len, dtype=torch.long)
    joined_lengths = torch.zeros(PADDED_B, K, dtype=torch.long)
    for b in range(PADDED_B):
        for k, length in enumerate(block_lengths[b]):
            blocks[b, k, :length] = _random_ids(g, length)
            blocks[b, k, 0], blocks[b, k, length - 1] = CLS, SEP
            body = blocks[b, k, TITLE_LEN : length - 1] if length > TITLE_LEN else blocks[b, k, :0]
            row = torch.cat([query[b, : query_lengths[b]], body])[: seq_len - 1]
            joined[b, k, : len(row)], joined[b, k, len(row)] = row, SEP
            joined_lengths[b, k] = len(row) + 1
    positions = torch.arange(seq_len)
    block_mask = (positions < torch.tensor(block_lengths)[..., None]).long()  # [B, K, L]
    joined_mask = (positions < joined_lengths[..., None]).long()  # [B, K, L]
    joined_types = ((positions >= torch.tensor(query_lengths)[:, None, None]) & joined_mask.bool()).long()
    block_types = ((positions >= TITLE_LEN) & block_mask.bool()).long()
    query_mask = (torch.arange(QUERY_LEN) < torch.tensor(query_lengths)[:, None]).long()  # [B, 32]
    return dict(query=query, query_mask=query_mask, blocks=blocks, block_mask=block_mask, block_types=block_types,
                joined=joined, joined_mask=joined_mask, joined_types=joined_types, labels=labels)


def run_padded_step(rounds: int, warmup: int = 1) -> dict:
    """Today's REALM step (fp32, one padded batch), the new one (bf16 autocast, length buckets) and a bare
    `BertModel` fwd+bwd over the same padded tensors, interleaved, on the same weights; real (non-pad) tokens/s."""
    from transformers import BertConfig, BertModel

    from realm_hf import RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig, RealmRetriever, RealmRetrieverConfig

    torch.set_num_threads(2)
    load_start = os.getloadavg()
    x = on_device(padded_pretrain_inputs(288))
    torch.manual_seed(0)
    retriever = RealmRetriever(RealmRetrieverConfig(bert_config=BERT, pooling="cls", query_max_length=QUERY_LEN,
                                                    block_max_length=288)).train()
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(bert_config=BERT, num_candidates=K, max_length=288,
                                                                mask_token_id=MASK)).train()
    enc_bert = BertModel(BertConfig(**BERT), add_pooling_layer=False).train()
    ret_bert = BertModel(BertConfig(**BERT), add_pooling_layer=False).train()
    for model in (retriever, encoder, enc_bert, ret_bert):  # no dropout: the variants' losses are compared
        model.to(DEVICE)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    flat = {name: x[name].view(-1, 288) for name in ("blocks", "block_mask", "block_types", "joined", "joined_mask",
                                                      "joined_types")}

    def realm_step(buckets: int, dtype: torch.dtype | None) -> float:
        retriever.config.length_buckets = encoder.config.length_buckets = buckets
        with torch.autocast(DEVICE.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            scores = retriever(query_input_ids=x["query"], query_attention_mask=x["query_mask"],
                               candidate_input_ids=x["blocks"], candidate_attention_mask=x["block_mask"],
                               candidate_token_type_ids=x["block_types"], null_candidate_index=0).relevance_scores
            loss = encoder(input_ids=x["joined"], attention_mask=x["joined_mask"], token_type_ids=x["joined_types"],
                           relevance_scores=scores, labels=x["labels"], null_candidate_index=0).loss
        loss.backward()
        return loss.item()

    def bare_bert() -> float:
        loss = enc_bert(input_ids=flat["joined"], attention_mask=flat["joined_mask"],
                        token_type_ids=flat["joined_types"]).last_hidden_state.sum()
        loss = loss + ret_bert(input_ids=flat["blocks"], attention_mask=flat["block_mask"],
                               token_type_ids=flat["block_types"]).last_hidden_state.sum()
        loss = loss + ret_bert(input_ids=x["query"], attention_mask=x["query_mask"]).last_hidden_state.sum()
        loss.backward()
        return float("nan")

    variants = {
        "today (fp32, one padded batch)": lambda: realm_step(1, None),
        f"length buckets ({PADDED_LENGTH_BUCKETS}), fp32": lambda: realm_step(PADDED_LENGTH_BUCKETS, None),
        "bf16 autocast, one padded batch": lambda: realm_step(1, torch.bfloat16),
        f"new (bf16 autocast + {PADDED_LENGTH_BUCKETS} length buckets)": lambda: realm_step(PADDED_LENGTH_BUCKETS, torch.bfloat16),
        "bare BertModel fp32 (padded)": bare_bert,
    }
    seconds = {name: [] for name in variants}
    cpu_seconds = {name: [] for name in variants}  # process CPU time, all threads: less hurt by other load
    losses = {}
    for rep in range(warmup + rounds):
        for name, step in variants.items():
            for model in (retriever, encoder, enc_bert, ret_bert):
                model.zero_grad(set_to_none=True)
            synchronize(DEVICE)
            start, cpu_start = time.perf_counter(), time.process_time()
            losses[name] = step()
            synchronize(DEVICE)
            elapsed, cpu_elapsed = time.perf_counter() - start, time.process_time() - cpu_start
            logger.info("padded step %s %s: %.2f s (CPU %.2f s)", name,
                        "warmup" if rep < warmup else f"repeat {rep - warmup + 1}", elapsed, cpu_elapsed)
            if rep >= warmup:
                seconds[name].append(elapsed)
                cpu_seconds[name].append(cpu_elapsed)
    real_tokens = int(x["joined_mask"].sum() + x["block_mask"].sum() + x["query_mask"].sum())
    padded_tokens = int(x["joined_mask"].numel() + x["block_mask"].numel() + x["query_mask"].numel())
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu_seconds.items()}
    return {
        "real_tokens": real_tokens, "padded_tokens": padded_tokens, "seconds": seconds, "cpu_seconds": cpu_seconds,
        "median_seconds": medians, "median_cpu_seconds": cpu_medians,
        "median_real_tokens_per_second": {name: real_tokens / t for name, t in medians.items()},
        "loss": losses, "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "machine": device_name(DEVICE),
    }


def padded_markdown(result: dict, command: str) -> str:
    r = result
    today = "today (fp32, one padded batch)"
    rows = ["| step | median s | real tokens/s | × today | median CPU s (2 threads) | × today (CPU) | loss |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, t in r["median_seconds"].items():
        loss, cpu = r["loss"][name], r["median_cpu_seconds"][name]
        rows.append(f"| {name} | {t:.2f} | {r['median_real_tokens_per_second'][name]:,.0f} | "
                    f"{r['median_seconds'][today] / t:.2f}x | {cpu:.2f} | {r['median_cpu_seconds'][today] / cpu:.2f}x | "
                    f"{'-' if loss != loss else f'{loss:.4f}'} |")
    return "\n".join([
        "# The REALM training step on padded batches: real-token throughput",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {r['machine']}, torch {torch.__version__}, 2 CPU threads; 1-minute load average "
        f"at the start {r['loadavg_start'][0]:.1f}, at the end {r['loadavg_end'][0]:.1f}. MiniLM-size BERTs (random "
        "weights, dropout off so that losses "
        f"compare), B={PADDED_B} masked sentences × K={K} candidates (the null document first, then blocks of real "
        f"wiki-2015 lengths), L=288: {r['real_tokens']:,} real of {r['padded_tokens']:,} padded tokens "
        f"({r['real_tokens'] / r['padded_tokens']:.0%}). The variants run interleaved in one process on the same "
        f"weights, {len(next(iter(r['seconds'].values())))} timed repeats each after a warm-up.",
        "",
        *rows,
        "",
        "Real tokens = non-pad tokens of the joined sequences, candidate blocks and queries. The bare BertModel runs the "
        "same padded tensors in fp32 (no retrieval, no MLM head): the floor of today's step.",
        "",
    ])


# ----------------------------------------------------------------------------------------------------- workers
def new_variants(seq_len: int | None) -> tuple:
    """realm_hf and bare-BERT closures for one case (seq_len None = Open-QA)."""
    from transformers import BertConfig, BertModel

    from realm_hf import (RealmForOpenQA, RealmForOpenQAConfig, RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig,
                          RealmRetriever, RealmRetrieverConfig)

    torch.manual_seed(0)
    # pooling="pooler": the old embedder's pooler -> dense -> LayerNorm, so the two retrievers are the same network
    retriever_kwargs = dict(bert_config=BERT, pooling="pooler", query_max_length=QUERY_LEN)
    if seq_len is None:
        x = on_device(openqa_inputs())
        qa = RealmForOpenQA(RealmForOpenQAConfig(retriever_config=retriever_kwargs,
                                                 reader_config=dict(bert_config=BERT, max_length=QA_LEN),
                                                 top_k=QA_TOP_K)).eval().to(DEVICE)
        bert = BertModel(BertConfig(**BERT), add_pooling_layer=False).eval().to(DEVICE)
        reader_flat, reader_types_flat = x["reader"].view(-1, QA_LEN), x["reader_types"].view(-1, QA_LEN)

        def realm_hf():
            with torch.no_grad():
                qa(query_input_ids=x["query"], query_attention_mask=ones(x["query"]),
                   query_token_type_ids=x["query_types"], reader_input_ids=x["reader"],
                   reader_attention_mask=ones(x["reader"]), reader_token_type_ids=x["reader_types"],
                   candidate_embeds=x["candidate_embeds"])

        def bare_bert():
            with torch.no_grad():
                bert(input_ids=x["query"], attention_mask=ones(x["query"]), token_type_ids=x["query_types"])
                bert(input_ids=reader_flat, attention_mask=ones(reader_flat), token_type_ids=reader_types_flat)

        return x, {"realm_hf": realm_hf, "bare_bert": bare_bert}, ()

    x = on_device(pretrain_inputs(seq_len))
    retriever = RealmRetriever(RealmRetrieverConfig(**retriever_kwargs, block_max_length=seq_len)).train().to(DEVICE)
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(bert_config=BERT, num_candidates=K,
                                                                max_length=seq_len, mask_token_id=MASK)).train()
    encoder.to(DEVICE)
    enc_bert = BertModel(BertConfig(**BERT), add_pooling_layer=False).train().to(DEVICE)
    ret_bert = BertModel(BertConfig(**BERT), add_pooling_layer=False).train().to(DEVICE)
    flat = {name: x[name].view(-1, seq_len) for name in ("blocks", "block_types", "joined", "joined_types")}

    def realm_hf():
        scores = retriever(query_input_ids=x["query"], query_attention_mask=ones(x["query"]),
                           query_token_type_ids=x["query_types"], candidate_input_ids=x["blocks"],
                           candidate_attention_mask=ones(x["blocks"]),
                           candidate_token_type_ids=x["block_types"]).relevance_scores  # [B, K]
        encoder(input_ids=x["joined"], attention_mask=ones(x["joined"]), token_type_ids=x["joined_types"],
                relevance_scores=scores, labels=x["labels"]).loss.backward()

    def bare_bert():
        loss = enc_bert(input_ids=flat["joined"], attention_mask=ones(flat["joined"]),
                        token_type_ids=flat["joined_types"]).last_hidden_state.sum()
        loss = loss + ret_bert(input_ids=flat["blocks"], attention_mask=ones(flat["blocks"]),
                               token_type_ids=flat["block_types"]).last_hidden_state.sum()
        loss = loss + ret_bert(input_ids=x["query"], attention_mask=ones(x["query"]),
                               token_type_ids=x["query_types"]).last_hidden_state.sum()
        loss.backward()

    models = (retriever, encoder, enc_bert, ret_bert)
    return x, {"realm_hf": realm_hf, "bare_bert": bare_bert}, models


def old_variants(seq_len: int | None) -> tuple:
    from transformers.models.deprecated.realm.configuration_realm import RealmConfig
    from transformers.models.deprecated.realm.modeling_realm import (RealmForOpenQA, RealmKnowledgeAugEncoder,
                                                                     RealmScorer)

    torch.manual_seed(0)
    if seq_len is None:
        x = on_device(openqa_inputs())
        config = RealmConfig(**BERT, retriever_proj_size=PROJ, reader_beam_size=QA_TOP_K, reader_seq_len=QA_LEN,
                             num_block_records=1)
        qa = RealmForOpenQA(config).eval().to(DEVICE)

        def old():
            with torch.no_grad():
                for i in range(QA_BATCH):  # the old class takes one question per call
                    question = x["query"][i : i + 1]  # [1, 32]
                    projection = qa.embedder(input_ids=question, attention_mask=ones(question),
                                             token_type_ids=x["query_types"][i : i + 1]).projected_score  # [1, 128]
                    relevance = torch.einsum("D,BD->B", projection.squeeze(), x["candidate_embeds"][i])  # [5]
                    qa.reader(input_ids=x["reader"][i], attention_mask=ones(x["reader"][i]),
                              token_type_ids=x["reader_types"][i], relevance_score=relevance,
                              block_mask=x["block_mask"][i], return_dict=True)

        return x, {"old": old}, ()

    x = on_device(pretrain_inputs(seq_len))
    config = RealmConfig(**BERT, retriever_proj_size=PROJ, num_candidates=K)
    scorer, encoder = RealmScorer(config).train().to(DEVICE), RealmKnowledgeAugEncoder(config).train().to(DEVICE)
    mlm_mask = (x["labels"] != -100).long()

    def old():
        scores = scorer(input_ids=x["query"], attention_mask=ones(x["query"]), token_type_ids=x["query_types"],
                        candidate_input_ids=x["blocks"], candidate_attention_mask=ones(x["blocks"]),
                        candidate_token_type_ids=x["block_types"]).relevance_score  # [B, K]
        encoder(input_ids=x["joined"], attention_mask=ones(x["joined"]), token_type_ids=x["joined_types"],
                relevance_score=scores, labels=x["labels"], mlm_mask=mlm_mask).loss.backward()

    return x, {"old": old}, (scorer, encoder)


def time_case(build, seq_len: int | None, warmup: int, repeats: int) -> dict:
    """Build the variants of one case, then run warmup + repeats of each, interleaved; returns seconds per step."""
    x, variants, models = build(seq_len)  # models: those whose gradients are reset between steps
    timings = {name: [] for name in variants}
    cpu_timings = {name: [] for name in variants}  # process CPU time (all threads): less hurt by other load
    for rep in range(warmup + repeats):
        for name, fn in variants.items():
            for model in models:
                model.zero_grad(set_to_none=True)
            synchronize(DEVICE)
            start, cpu_start = time.perf_counter(), time.process_time()
            fn()
            synchronize(DEVICE)
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
            logger.info("%s %s %s: %.2f s", "openqa" if seq_len is None else f"L={seq_len}", name,
                        "warmup" if rep < warmup else f"repeat {rep - warmup + 1}/{repeats}", seconds)
            if rep >= warmup:
                timings[name].append(seconds)
                cpu_timings[name].append(cpu_seconds)
    return {"fingerprint": fingerprint(x), "seconds": timings, "cpu_seconds": cpu_timings}


def run_worker(kind: str, case: str, warmup: int, repeats: int) -> dict:
    import transformers

    torch.set_num_threads(2)
    out = {"worker": kind, "case": case, "torch": torch.__version__, "transformers": transformers.__version__,
           "python": platform.python_version(), "num_threads": torch.get_num_threads(), "device": device_name(DEVICE),
           "loadavg_start": os.getloadavg()}
    build = new_variants if kind == "new" else old_variants
    out |= time_case(build, CASES[case], warmup, repeats)
    return out


# ----------------------------------------------------------------------------------------------------- driver
def launch(kind: str, case: str, settings: dict) -> dict:
    python = OLD_PYTHON if kind == "old" else sys.executable
    command = [python, __file__, "--worker", kind, "--case", case, "--device", str(DEVICE),
               "--warmup", str(settings["warmup"][case]), "--repeats", str(settings["repeats"][case])]
    start = time.perf_counter()
    # stderr (the worker's log) goes straight to ours; stdout carries the JSON result
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    logger.info("worker %s %s finished in %.0f s", kind, case, time.perf_counter() - start)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(runs: list[dict]) -> dict:
    """Per case: all raw timings, medians (and minimums, the least disturbed by other load), throughput, ratios."""
    tokens = {"train_L128": pretrain_tokens(128), "train_L288": pretrain_tokens(288), "openqa_B32": OPENQA_TOKENS}
    summary = {}
    for case in CASES:
        case_runs = [run for run in runs if run["case"] == case]
        fingerprints = {run["fingerprint"] for run in case_runs}
        if len(fingerprints) != 1:
            raise RuntimeError(f"{case}: the workers saw different inputs (fingerprints {fingerprints}).")
        raw, raw_cpu = {}, {}
        for run in case_runs:
            for name, seconds in run["seconds"].items():
                raw.setdefault(name, []).extend(seconds)
                raw_cpu.setdefault(name, []).extend(run["cpu_seconds"][name])
        summary[case] = {"tokens": tokens[case], "raw_seconds": raw, "raw_cpu_seconds": raw_cpu}
        for stat, reduce in (("median", statistics.median), ("min", min)):
            seconds = {name: reduce(values) for name, values in raw.items()}
            summary[case] |= {
                f"{stat}_seconds": seconds,
                f"{stat}_tokens_per_second": {name: tokens[case] / t for name, t in seconds.items()},
                f"{stat}_realm_hf_over_bare": seconds["realm_hf"] / seconds["bare_bert"],
                f"{stat}_speedup_vs_old": seconds["old"] / seconds["realm_hf"],
            }
            if case == "openqa_B32":
                summary[case][f"{stat}_questions_per_second"] = {name: QA_BATCH / t for name, t in seconds.items()}
    return summary


def table(summary: dict, stat: str) -> list[str]:
    labels = {"train_L128": f"Training step fwd+bwd, B={B} K={K}, L=128",
              "train_L288": f"Training step fwd+bwd, B={B} K={K}, L=288",
              "openqa_B32": f"Open-QA forward, {QA_BATCH} questions x top-{QA_TOP_K}, L={QA_LEN}"}
    rows = ["| Case | tokens | bare BERT | realm_hf | old transformers-REALM | realm_hf / bare (time) | speed-up vs old |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for case, s in summary.items():
        def cell(name: str) -> str:
            rate = (f"{s[f'{stat}_questions_per_second'][name]:.2f} q/s" if case == "openqa_B32"
                    else f"{s[f'{stat}_tokens_per_second'][name]:,.0f} tok/s")
            return f"{s[f'{stat}_seconds'][name]:.2f} s ({rate})"

        rows.append(f"| {labels[case]} | {s['tokens']:,} | {cell('bare_bert')} | {cell('realm_hf')} | {cell('old')} | "
                    f"{s[f'{stat}_realm_hf_over_bare']:.2f}x | {s[f'{stat}_speedup_vs_old']:.2f}x |")
    return rows


def markdown(result: dict) -> str:
    m, settings, load = result["machine"], result["settings"], result["loadavg_1min_per_worker"]
    return "\n".join([
        "# realm_hf vs transformers-REALM vs bare BERT: model speed",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Machine: {m['cpu_model']}, {m['cpu_count']} cores, torch {m['torch']} with {m['num_threads']} threads"
        + (f", models on the GPU {m['device']}" if m.get("device_type") == "cuda" else "") + "; "
        f"realm_hf on transformers {m['transformers_new']}, old REALM classes on transformers {m['transformers_old']}.",
        f"Model: MiniLM-size BERT ({BERT['num_hidden_layers']} layers, hidden {BERT['hidden_size']}, "
        f"{BERT['num_attention_heads']} heads, intermediate {BERT['intermediate_size']}, vocab {BERT['vocab_size']}), "
        f"random weights, fp32. {settings['rounds']} rounds; in each, every case runs in a fresh old worker process, "
        f"then a fresh new one (warm-up steps {settings['warmup']}, timed repeats {settings['repeats']}).",
        f"1-minute load average when the workers started: {min(load):.1f} to {max(load):.1f} on {m['cpu_count']} "
        "cores (above the core count, other processes competed for the CPU and times are inflated).",
        "",
        "## Median over all timed repeats",
        "",
        *table(result["summary"], "median"),
        "",
        "## Minimum over all timed repeats (least disturbed by other processes)",
        "",
        *table(result["summary"], "min"),
        "",
        f"Tokens: training = 2·B·K·L (joined sequences + candidate blocks) + B·{QUERY_LEN} (queries); Open-QA = "
        f"{QA_BATCH}·{QA_TOP_K}·{QA_LEN} reader tokens + {QA_BATCH}·{QUERY_LEN} question tokens. The old Open-QA "
        f"column loops its embedder + reader over the {QA_BATCH} questions (it accepts batch size 1) and leaves out "
        "its in-memory search. Raw timings are in the JSON file next to this one.",
        "",
        *real_token_section(result),
    ])


def real_token_section(result: dict) -> list[str]:
    """The `real_token_step` part of models.json (one entry per machine measured; `--padded-step` adds or replaces
    this machine's) as Markdown."""
    lines = []
    for machine, step in result.get("real_token_step", {}).items():
        body = padded_markdown(step, step["command"]).split("\n", 1)[1]
        lines += [f"## The REALM training step in real (non-pad) tokens/s on {machine}: today's, the new one, bare BERT",
                  body]
    return lines


def real_token_steps_with(step: dict, stem: str = "models") -> dict:
    """The `real_token_step` figures of `{stem}.json`, one per machine, with `step` in place of its machine's."""
    saved = RESULTS / f"{stem}.json"
    measured = json.loads(saved.read_text()).get("real_token_step", {}) if saved.is_file() else {}
    return measured | {step["machine"]: step}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round, one repeat per case (smoke run)")
    parser.add_argument("--rounds", type=int, help="alternating old/new worker invocations per case (default 3)")
    parser.add_argument("--padded-step", action="store_true", help="only the REALM step on padded batches of real "
                        "lengths: today's vs bf16 + length buckets vs bare BERT (writes models-padded-step.{json,md})")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: where the models run. On cuda the "
                        "results go to models-gpu.{json,md}, with more warm-up steps and repeats per worker.")
    parser.add_argument("--worker", choices=["old", "new"], help=argparse.SUPPRESS)
    parser.add_argument("--case", choices=list(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    on_gpu = DEVICE.type == "cuda"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[%(process)d] %(message)s", stream=sys.stderr)

    if args.worker:
        print(json.dumps(run_worker(args.worker, args.case, args.warmup, args.repeats)), flush=True)
        return
    if args.padded_step:
        command = " ".join(["HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_models.py", *sys.argv[1:]])
        step = run_padded_step(args.rounds or 3, warmup=5 if on_gpu else 1) | {"command": command}
        stem = "models-gpu" if on_gpu else "models"
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{stem}-padded-step.json").write_text(json.dumps(step, indent=2) + "\n")
        (RESULTS / f"{stem}-padded-step.md").write_text(padded_markdown(step, command))
        models_file = RESULTS / f"{stem}.json"
        if models_file.is_file():  # the full run's file carries the latest real-token figures next to its own
            result = json.loads(models_file.read_text()) | {"real_token_step": real_token_steps_with(step, stem)}
            models_file.write_text(json.dumps(result, indent=2) + "\n")
            (RESULTS / f"{stem}.md").write_text(markdown(result))
        print((RESULTS / f"{stem}-padded-step.md").read_text())
        return

    settings = dict(QUICK if args.quick else GPU if on_gpu else FULL)
    if args.rounds:
        settings["rounds"] = args.rounds
    command = " ".join(["HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_models.py", *sys.argv[1:]])
    logger.info("settings: %s", settings)
    runs = []
    start = time.perf_counter()
    for round_index in range(settings["rounds"]):
        for case in CASES:
            for kind in ("old", "new"):
                logger.info("round %d/%d, %s: worker %s", round_index + 1, settings["rounds"], case, kind)
                runs.append(launch(kind, case, settings))
    import transformers

    old_run, new_run = next(r for r in runs if r["worker"] == "old"), next(r for r in runs if r["worker"] == "new")
    result = {
        "command": command,
        "machine": {
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "torch": torch.__version__, "num_threads": new_run["num_threads"], "device": new_run["device"],
            "device_type": DEVICE.type,
            "transformers_new": transformers.__version__, "transformers_old": old_run["transformers"],
            "python": platform.python_version(),
        },
        "settings": settings | {"bert": BERT, "B": B, "K": K, "query_len": QUERY_LEN, "num_masked": NUM_MASKED,
                                "qa_batch": QA_BATCH, "qa_top_k": QA_TOP_K, "qa_len": QA_LEN, "dtype": "float32"},
        "wall_seconds": time.perf_counter() - start,
        "loadavg_1min_per_worker": [run["loadavg_start"][0] for run in runs],
        "summary": summarize(runs),
        "runs": runs,
    }
    if not args.quick:  # the REALM step in real tokens/s, today's vs the new one vs bare BERT (issue 13)
        padded_rounds = 20 if on_gpu else settings["rounds"]
        padded_command = ("HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_models.py --padded-step "
                          f"--rounds {padded_rounds}" + (f" --device {args.device}" if on_gpu else ""))
        step = run_padded_step(padded_rounds, warmup=5 if on_gpu else 1) | {"command": padded_command}
        result["real_token_step"] = real_token_steps_with(step, "models-gpu" if on_gpu else "models")
    stem = "models-quick" if args.quick else "models-gpu" if on_gpu else "models"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{stem}.md").write_text(markdown(result))
    logger.info("wrote %s and %s in %.0f s", RESULTS / f"{stem}.json", RESULTS / f"{stem}.md", result["wall_seconds"])
    print((RESULTS / f"{stem}.md").read_text())


if __name__ == "__main__":
    main()
