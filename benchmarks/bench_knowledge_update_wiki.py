"""Knowledge updates on real text (REALM paper, Appendix C): Wikipedia articles created around 2021 added to the index
of an Open-QA model trained before them, and articles it was trained with taken out.

    HF_HUB_OFFLINE=1 realm-hf demo --recipe wikipedia-qa          # the model: 38 min on 2 CPU cores
    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge_update_wiki.py --model outputs/demo-wikipedia-qa/openqa/final

Probes are title probes (`realm_hf.data.title_probes.title_probe`): a "what ..." question made from an article's first
sentence with its title taken out, answered right when the answer is the title (exact match). Two sets of
`--num-probes` each:

- **new**: articles of `--new-articles` (default `../shared/data/wiki-2021-new`, a seeded sample of those whose first
  sentence gives a probe), asked with the index as trained (before), then after all of them are added with the model's
  own document tower (`realm_hf.retrieval.add_articles_to_index`);
- **indexed**: articles already in the model's index (probes made from their first block, a seeded sample), asked
  with the index as trained (the reference the added articles should reach), then after their blocks are removed
  (`RealmIndex.remove`): the model should no longer answer them.

Per set and state: exact match, the share answered from the probe's own article, and the rank of its first block
among the retrieved ones. Writes `<output>.json` and `<output>.md` (default benchmarks/results/knowledge-update-wiki).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time

import numpy as np
import torch

from realm_hf.corpus import load_articles
from realm_hf.data.title_probes import title_probe
from realm_hf.evaluation import exact_match
from realm_hf.retrieval import add_articles_to_index

from bench_common import RESULTS, machine



def sample_probes(articles: list[dict], tokenizer, count: int, seed: int, max_length: int) -> list[dict]:
    """`count` title probes of a seeded sample of `articles` (those that give a probe that fits the query tower)."""
    order = list(range(len(articles)))
    random.Random(seed).shuffle(order)
    probes = []
    for i in order:
        probe = title_probe(articles[i], tokenizer)
        if probe is not None and len(tokenizer(probe["question"])["input_ids"]) <= max_length:
            probes.append({**probe, "article": articles[i]})
            if len(probes) == count:
                break
    return probes


def first_blocks(index) -> list[dict]:
    """Each indexed article as `{"id", "title", "text"}` from its first block (blocks are in article order)."""
    blocks = index.blocks.select_columns(["article_id", "title", "text"])
    seen, articles = set(), []
    for article_id, title, text in zip(blocks["article_id"], blocks["title"], blocks["text"]):
        if article_id not in seen:
            seen.add(article_id)
            articles.append({"id": article_id, "title": title, "text": text})
    return articles


def ask(pipe, probes: list[dict], article_of_block: dict[int, str], batch_size: int) -> tuple[dict, list[dict]]:
    """Exact match, answers read from the probe's own article, and where its first block ranks among the retrieved;
    and the answers."""
    answers = pipe([p["question"] for p in probes], batch_size=batch_size)
    right = own = 0
    ranks = []
    for probe, answer in zip(probes, answers):
        right += bool(answer["answer"]) and exact_match(answer["answer"], [probe["answer"]])
        own += article_of_block.get(answer["block_id"]) == probe["article"]["id"]
        retrieved = [article_of_block.get(doc["block_id"]) for doc in answer["documents"]]
        ranks.append(retrieved.index(probe["article"]["id"]) + 1 if probe["article"]["id"] in retrieved else None)
    n = len(probes)
    return {
        "exact_match": right / n, "answered_from_own_article": own / n,
        "own_article_retrieved": sum(r is not None for r in ranks) / n,
        "own_article_first": sum(r == 1 for r in ranks) / n, "probes": n,
    }, answers


def article_ids_of_blocks(index) -> dict[int, str]:
    return dict(zip(index.blocks["block_id"], index.blocks["article_id"]))


def write_markdown(results: dict, path: str) -> None:
    rows = [
        ("new articles, before they are added", results["new"]["before"]),
        ("new articles, after they are added", results["new"]["after"]),
        ("indexed articles (trained with), as trained", results["indexed"]["before"]),
        ("indexed articles, after their blocks are removed", results["indexed"]["after_removal"]),
    ]
    lines = [
        "# Knowledge updates on real text",
        "",
        f"`python benchmarks/bench_knowledge_update_wiki.py` — {results['machine']}. Model: `{results['model']}` "
        f"({results['index_blocks']} blocks in its index). New articles: {results['new_articles']} "
        f"({results['new']['added_articles']} articles added as {results['new']['added_blocks']} blocks in "
        f"{results['new']['add_seconds']:.1f} s). {results['probes']} title probes per set (seed {results['seed']}).",
        "",
        "| probes | exact match | answered from its article | its article retrieved | ranked first |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        lines.append(
            f"| {name} | {r['exact_match']:.1%} | {r['answered_from_own_article']:.1%} | "
            f"{r['own_article_retrieved']:.1%} | {r['own_article_first']:.1%} |"
        )
    lines += ["", "Examples (new articles, after): " + "; ".join(
        f"\"{e['question']}\" -> {e['answer']!r} (expected {e['expected']!r})" for e in results["examples"]), ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="outputs/demo-wikipedia-qa/openqa/final", help="A RealmForOpenQA directory.")
    parser.add_argument("--new-articles", default="../shared/data/wiki-2021-new")
    parser.add_argument("--num-probes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--output", default=os.path.join(RESULTS, "knowledge-update-wiki"), help="Prefix of .json/.md.")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
    from transformers import pipeline

    from realm_hf.pipelines import OPEN_QA_TASK

    pipe = pipeline(OPEN_QA_TASK, model=args.model, device="cpu")
    index, retriever = pipe.index, pipe.model.retriever
    query_length = retriever.config.query_max_length
    index_blocks = index.num_blocks

    indexed_articles = first_blocks(index)
    indexed = sample_probes(indexed_articles, pipe.tokenizer, args.num_probes, args.seed, query_length)
    indexed_titles = {a["title"].lower() for a in indexed_articles}
    # new articles: not already indexed under their title
    candidates = [a for a in load_articles(args.new_articles) if (a["title"] or "").lower() not in indexed_titles]
    new = sample_probes(candidates, pipe.tokenizer, args.num_probes, args.seed, query_length)
    if len(new) < args.num_probes or len(indexed) < args.num_probes:
        raise SystemExit(f"error: only {len(new)} new and {len(indexed)} indexed probes; pass a smaller --num-probes.")

    articles = article_ids_of_blocks(index)
    results: dict = {
        "machine": machine(), "model": args.model,
        "new_articles": args.new_articles, "probes": args.num_probes, "seed": args.seed, "index_blocks": index_blocks,
        "new": {"before": ask(pipe, new, articles, args.batch_size)[0]},
        "indexed": {"before": ask(pipe, indexed, articles, args.batch_size)[0]},
    }
    began = time.time()
    new_ids = add_articles_to_index(index, pipe.model, pipe.tokenizer, [p["article"] for p in new])
    results["new"].update(added_articles=len(new), added_blocks=len(new_ids), add_seconds=time.time() - began)
    articles = article_ids_of_blocks(index)
    results["new"]["after"], answers = ask(pipe, new, articles, args.batch_size)
    results["examples"] = [
        {"question": p["question"], "answer": a["answer"], "expected": p["answer"]} for p, a in zip(new[:5], answers)
    ]
    removed = {p["article"]["id"] for p in indexed}
    block_ids = np.array([b for b, a in articles.items() if a in removed], dtype=np.int64)
    index.remove(block_ids)
    results["indexed"]["removed_blocks"] = len(block_ids)
    results["indexed"]["after_removal"] = ask(pipe, indexed, article_ids_of_blocks(index), args.batch_size)[0]
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output + ".json", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    write_markdown(results, args.output + ".md")
    print(open(args.output + ".md", encoding="utf-8").read())
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
