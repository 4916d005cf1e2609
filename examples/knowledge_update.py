"""Update a trained model's knowledge without retraining (REALM paper, Appendix C): ask about articles that are not in
its index, add them to the index with the model's own document tower, ask again.

    python examples/knowledge_update.py --model outputs/openqa/final --max_new_articles 5

    python examples/knowledge_update.py --model outputs/openqa/final --new_titles "Jarred Shaw" "Deon Jones" \
        --questions "who plays basketball for trouville in uruguay" "who played for the fukushima firebonds"

    python examples/knowledge_update.py --model outputs/pretrain/final --max_new_articles 5   # fill-mask

`--model` is a fine-tuned `RealmForOpenQA` directory (open-domain QA) or a pre-training output directory
(`retriever/`, `encoder/`, `index/`: retrieval-augmented fill-mask). The new articles come from
`../shared/data/wiki-2021-new` (Wikipedia articles created around 2021, after the 2015 corpus): the ones named by
`--new_titles`, else the first `--max_new_articles` whose first sentence names the title. Without `--questions`, each
article gives a probe made from its first sentence with the title taken out
(`realm_hf.data.title_probes.title_probe`): a "what ..." question for a QA model, the title's wordpieces masked for a
fill-mask model; the expected answer is the title. Answers read from a new article are marked `<- NEW`. The model's
index on disk is not changed; pass `--save_index DIR` to keep the updated one.
"""

import logging
import os
from dataclasses import dataclass, field

from realm_hf.corpus import load_articles
from realm_hf.data.title_probes import title_probe
from realm_hf.evaluation import exact_match
from realm_hf.retrieval import add_articles_to_index
from realm_hf.training.entry_points import parse_command_line


@dataclass
class KnowledgeUpdateArguments:
    model: str = field(metadata={"help": "A RealmForOpenQA directory, or a pre-training output dir (fill-mask)."})
    index_dir: str | None = field(default=None, metadata={"help": "Index to start from (default: the model's own)."})
    new_articles: str = field(
        default="../shared/data/wiki-2021-new", metadata={"help": "Articles to add from (JSONL[.gz], Parquet, dir)."}
    )
    new_titles: list[str] = field(default_factory=list, metadata={"help": "Titles of the articles to add."})
    max_new_articles: int = field(default=3, metadata={"help": "Without --new_titles: add this many articles."})
    questions: list[str] = field(
        default_factory=list, metadata={"help": "Questions to ask (fill-mask: texts with [MASK]); default: probes."}
    )
    num_blocks: int | None = field(default=None, metadata={"help": "Blocks retrieved per query (default: model's)."})
    save_index: str | None = field(default=None, metadata={"help": "Save the updated index to this directory."})
    device: str | None = field(default=None, metadata={"help": "cpu, cuda, ... (default: cuda when available)."})


def select_articles(
    args: KnowledgeUpdateArguments, tokenizer, query_key: str, query_max_length: int
) -> tuple[list[dict], list[dict]]:
    """The articles to add and, for each one that gives a probe, its probe (auto-selected ones fit the query tower)."""
    articles = load_articles(args.new_articles)
    if args.new_titles:
        wanted = {title.lower(): title for title in args.new_titles}
        chosen = [a for a in articles if a["title"].lower() in wanted]
        missing = sorted(set(wanted) - {a["title"].lower() for a in chosen})
        if missing:
            raise SystemExit(f"error: no article titled {[wanted[m] for m in missing]} in {args.new_articles}.")
        probes = [title_probe(a, tokenizer) for a in chosen]
        return chosen, [p for p in probes if p is not None]
    chosen, probes = [], []
    for article in articles:
        probe = title_probe(article, tokenizer)
        if probe is not None and len(tokenizer(probe[query_key])["input_ids"]) <= query_max_length:
            chosen.append(article)
            probes.append(probe)
            if len(chosen) == args.max_new_articles:
                break
    return chosen, probes


def ask(pipe, fill_mask: bool, queries: list[dict], num_blocks: int | None, new_ids: set[int]) -> int:
    """Print the answer and its source for each query; returns how many answers come from a new article."""
    from_new = 0
    kwargs = {} if num_blocks is None else {"num_blocks": num_blocks}
    for query in queries:
        if fill_mask:
            best = pipe(query["text"], top_k=1, **kwargs)[0]
            answer = best["token_str"]
            source = best["supporting_blocks"][0] if best["supporting_blocks"] else {"title": None, "block_id": None}
        else:
            best = pipe(query["text"], **kwargs)
            answer, source = best["answer"], best
        new = source["block_id"] in new_ids
        from_new += new
        expected = query.get("answer")
        hit = " (= expected)" if expected and answer and exact_match(answer, [expected]) else ""
        print(f"Q: {query['text']}")
        print(f"A: {answer}{hit}   source: {source['title']} (block {source['block_id']}){'   <- NEW' if new else ''}")
    return from_new


def main() -> None:
    (args,) = parse_command_line((KnowledgeUpdateArguments,), description=__doc__.split("\n\n")[0])
    fill_mask = os.path.isfile(os.path.join(args.model, "encoder", "config.json"))
    index_kwargs = {} if args.index_dir is None else {"index": args.index_dir}
    if fill_mask:
        from realm_hf.pipelines import RealmFillMaskPipeline

        pipe = RealmFillMaskPipeline.from_pretrained(args.model, device=args.device, **index_kwargs)
        retriever = pipe.retriever
    else:
        from transformers import pipeline

        from realm_hf.pipelines import OPEN_QA_TASK

        pipe = pipeline(OPEN_QA_TASK, model=args.model, device=args.device, **index_kwargs)
        retriever = pipe.model.retriever
    query_key = "cloze" if fill_mask else "question"
    articles, probes = select_articles(args, pipe.tokenizer, query_key, retriever.config.query_max_length)
    if args.questions:
        queries = [{"text": question} for question in args.questions]
    else:
        queries = [{"text": p[query_key], "answer": p["answer"]} for p in probes]
    if not queries:
        raise SystemExit(
            "error: no query: the first sentences of the chosen articles give no probe (none names its title in "
            f"8-40 words and {retriever.config.query_max_length} wordpieces); pass --questions."
        )
    print(f"New articles: {', '.join(a['title'] for a in articles)}\n")

    print(f"== Before the update ({pipe.index.num_blocks} blocks)")
    ask(pipe, fill_mask, queries, args.num_blocks, set())
    new_ids = add_articles_to_index(pipe.index, retriever, pipe.tokenizer, articles)
    print(f"\n== After adding {len(articles)} articles as {len(new_ids)} blocks ({pipe.index.num_blocks} blocks)")
    from_new = ask(pipe, fill_mask, queries, args.num_blocks, set(new_ids.tolist()))
    print(f"\n{from_new} of {len(queries)} answers now come from a new article.")
    if args.save_index:
        pipe.index.save_pretrained(args.save_index)
        print(f"Saved the updated index to {args.save_index}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    main()
