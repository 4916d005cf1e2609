"""examples/wiki/run.sh, the chained Wikipedia recipe, end to end on tiny data (configs wiki-tiny-*.yaml: all-MiniLM-L6-v2,
40 embedded articles, a few steps per stage, CPU processes, PARALLEL=1; the news of realm-news, X != Z: 6 other
embedded articles in a JSONL.gz written here): every stage runs, the report holds every row, a second run skips what
is complete, and missing data is named in one line."""

import gzip
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = ("minilm", "mlm", "ict", "realm", "realm-news", "realm-retriever", "bm25")


def write_questions(directory: str) -> None:
    """The four QA files run.sh reads, made from the embedded corpus (1,600 NQ lines: the chain slices [1000:1500]
    for pre-training's zero-shot recall and [:EVAL_QUESTIONS] for the test)."""
    from realm_hf.corpus.embedded import load_embedded_corpus

    articles = load_embedded_corpus(limit=40)
    os.makedirs(directory, exist_ok=True)
    for name, count in (("nq-dev.jsonl", 1600), ("webquestions-train.jsonl", 30), ("curatedtrec-train.jsonl", 30),
                        ("triviaqa-dev.jsonl", 30)):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            for i in range(count):
                article = articles[i % len(articles)]
                answer = article["text"].split()[0]
                f.write(json.dumps({"id": f"{name}-{i}", "question": f"what does {article['title']} start with?",
                                    "answers": [answer], "answer_format": "text"}) + "\n")


def write_news(path: str) -> None:
    """The pre-training corpus X of realm-news: 6 embedded articles that are not among Z's 40, one JSON line each with
    a column articles do not have (news-bbc's `category`)."""
    from realm_hf.corpus.embedded import load_embedded_corpus

    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, article in enumerate(load_embedded_corpus(limit=46)[40:]):
            f.write(json.dumps({"id": f"news-{i}", "category": "tech", "title": article["title"],
                                "text": article["text"]}) + "\n")


def run_chain(out: str, qa: str, *stages: str, news: str | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "OUT": out,
        "QA": qa,
        "NEWS": news or os.path.join(os.path.dirname(out), "news.jsonl.gz"),
        "CONFIGS": "examples/configs/wiki-tiny",
        "ACCELERATE_CONFIG": "examples/configs/accelerate-cpu.yaml",
        "EVAL_QUESTIONS": "20",
        "PARALLEL": "1",  # the rows' branches at the same time (the sequential order is the simpler path)
        "OMP_NUM_THREADS": "1",  # one thread per branch: accelerate would give each process every core (oversubscribed)
        "HF_HUB_OFFLINE": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    return subprocess.run(
        ["bash", "examples/wiki/run.sh", *stages], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    pytest.importorskip("spacy")
    base = tmp_path_factory.mktemp("wiki")
    out, qa = str(base / "out"), str(base / "qa")
    write_questions(qa)
    write_news(str(base / "news.jsonl.gz"))
    result = run_chain(out, qa, "all")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return out, qa


def test_the_chain_reports_every_row(chain):
    out, _ = chain
    with open(os.path.join(out, "wiki-gpu.json"), encoding="utf-8") as f:
        report = json.load(f)
    assert set(report["rows"]) == set(ROWS)
    for row, figures in report["rows"].items():
        assert figures["questions"] == 20, row
        low, high = figures["exact_match_ci95"]
        assert low <= figures["exact_match"] <= high, row
        assert figures["recall@5"] <= figures["recall@20"] <= figures["recall@100"], row
        if row != "bm25":  # fine-tuned until the watch slice's loss stopped falling, or max_steps
            assert figures["early_stopping"]["metric"] == "answerable_loss", row
            assert 1 <= figures["finetune_steps"] <= 3, row
    assert report["corpus"]["blocks"] > 0 and report["corpus"]["max_articles"] == 40
    pretraining = report["pretraining"]
    assert pretraining["steps"] == 5
    # the retriever learned after the 2-step reading warm-up: its utility was logged from then on
    assert [point["step"] for point in pretraining["ru_curve"]] == [3, 4, 5]
    assert any("eval/zero_shot_recall@5" in record or "eval/mlm_accuracy_with_retrieval" in record
               for record in pretraining["evaluations"])
    # every stage but the report, which writes the file while it runs
    expected_stages = {"mask", "mask-news", "mlm", "ict", "realm", "realm-news", "evaluate-bm25"} | {
        f"{verb}-{row}" for verb in ("finetune", "evaluate") for row in ROWS if row != "bm25"
    } - {"finetune-bm25"}
    assert expected_stages <= set(report["stage_seconds"])
    assert report["machine"]["torch"]
    # the masked-LM stage: its held-out accuracy before the first step and at the end, then the encoder's start
    mlm = report["mlm"]
    assert mlm["steps"] == 3 and [point["step"] for point in mlm["held_out_accuracy"]] == [0, 3]
    with open(os.path.join(out, "realm", "training_args.json"), encoding="utf-8") as f:
        assert json.load(f)["encoder"] == os.path.join(out, "mlm", "final")
    # REALM's step 0: the start encoder reading the source block and the null document
    assert pretraining["evaluations"][0]["step"] == 0
    assert "eval/mlm_accuracy_source_block" in pretraining["evaluations"][0]


def test_realm_news_is_realm_with_news_as_x_from_the_same_start_and_steps(chain):
    """The X != Z stage: realm's config, ICT start, encoder and steps, X = the news file, Z = the chain's blocks; its
    reading steps read Z's own sentences of the `mask` stage; its row fine-tuned as the realm row, from its model."""
    out, _ = chain
    with open(os.path.join(out, "wiki-gpu.json"), encoding="utf-8") as f:
        report = json.load(f)
    news, realm = report["pretraining_news"], report["pretraining"]
    data = news["data"]
    assert data["x_is_z"] is False and data["pretraining_corpus"] == os.path.join(os.path.dirname(out), "news.jsonl.gz")
    assert data["pretraining_articles"] is None  # masked ahead by mask-news
    with open(os.path.join(out, "masked-news", "masked_sentences.json"), encoding="utf-8") as f:
        masked_news = json.load(f)
    assert masked_news["settings"]["pretraining_corpus"] == data["pretraining_corpus"]
    assert data["masked_sentences"] == masked_news["num_sentences"] > 0
    assert data["reading_sentences"] == report["pretraining_sentences"]  # those of `mask` (X = Z), read as they are
    assert data["knowledge_corpus_blocks"] == realm["data"]["knowledge_corpus_blocks"] == report["corpus"]["blocks"]
    assert realm["data"]["x_is_z"] is True
    assert news["steps"] == realm["steps"] == 5
    assert [point["step"] for point in news["ru_curve"]] == [3, 4, 5]  # after the same 2-step reading warm-up
    arguments = {}
    for stage in ("realm", "realm-news", "qa-realm", "qa-realm-news"):
        with open(os.path.join(out, stage, "training_args.json"), encoding="utf-8") as f:
            arguments[stage] = json.load(f)
    differing = {name for name in arguments["realm"] if arguments["realm"][name] != arguments["realm-news"].get(name)}
    assert differing == {"output_dir", "masked_sentences", "pretraining_corpus", "reading_sentences"}
    assert arguments["realm-news"]["reading_sentences"] == arguments["realm"]["masked_sentences"]
    differing = {name for name in arguments["qa-realm"]
                 if arguments["qa-realm"][name] != arguments["qa-realm-news"].get(name)}
    assert differing == {"output_dir", "model"}
    assert arguments["qa-realm-news"]["model"] == os.path.join(out, "realm-news", "final")


def test_a_second_run_skips_complete_stages(chain):
    out, qa = chain
    result = run_chain(out, qa, "mlm", "ict", "realm", "finetune-realm", "evaluate-realm", "realm-news", "mask")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[ict] " in result.stdout and "final is complete: skipped" in result.stdout
    assert "[mlm] " in result.stdout
    assert "[evaluate-realm] " in result.stdout and "exists: skipped" in result.stdout
    assert "already holds the masked sentences" in result.stdout
    assert "Embedding blocks" not in result.stderr  # nothing was trained or indexed again


def test_an_unknown_stage_is_refused_with_the_list(chain):
    out, qa = chain
    result = run_chain(out, qa, "pretrain")
    assert result.returncode == 2
    assert "unknown stage 'pretrain'" in result.stderr and "finetune-ROW" in result.stderr
    assert "realm-news" in result.stderr


def test_missing_news_is_named_in_one_line_before_any_work(tmp_path):
    news = str(tmp_path / "news-bbc" / "bbc-news.jsonl.gz")
    result = run_chain(str(tmp_path / "out"), str(tmp_path), "all", news=news)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"run.sh: no news corpus at NEWS={news} (news-bbc, the pre-training corpus X of the realm-news stage): "
        "docs/data.md says where it comes from; set NEWS=<its JSONL.gz, or any article file or folder>.\n"
    )
    assert not (tmp_path / "out").exists()
    # the stages of the X = Z rows do not read news: without it they are not refused for it
    result = run_chain(str(tmp_path / "out"), str(tmp_path), "mlm-typo", news=news)
    assert result.returncode == 2 and "no news corpus" not in result.stderr and "unknown stage 'mlm-typo'" in result.stderr
