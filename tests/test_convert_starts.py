"""Google's cc-news checkpoints converted by `realm-hf convert` are starts the training commands take as they are.

The commands a user types, run by `realm_hf.cli.main` in this process (the console script's code, imports paid once):
`realm-hf convert` of the tiny transformers-4.57 checkpoints of tests/fixtures/old_realm (a RealmEmbedder, a
RealmKnowledgeAugEncoder, a RealmScorer, as `google/realm-cc-news-pretrained-{embedder,encoder,scorer}`), then
`build-index` with the converted embedder, `pretrain` from the converted scorer + encoder, `ict` from the converted
embedder, and Open-QA `finetune` the paper's way: the retriever from the pre-trained embedder, the reader from the
pre-trained knowledge encoder. The converted models take at most 64 wordpieces (`max_position_embeddings` of the
fixtures): the commands' default lengths (288 / 96 / 288) are lowered to them, longer lengths asked for are refused.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest
import torch
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)
from safetensors.torch import load_file

from realm_hf.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "old_realm"

QUIET = ["--save_steps", "0", "--report_to", "none", "--logging_steps", "1", "--embed_dtype", "float32"]
"""Options of the training runs here: no checkpoints, no tracker, fp32 index (no bf16 probe)."""


def _words() -> list[str]:
    """The whole words of the fixtures' vocabulary (`w0`, `w1`, ...; its last entries may be `##s`-style pieces)."""
    vocab = (FIXTURES / "embedder" / "vocab.txt").read_text(encoding="utf-8").split()
    return [token for token in vocab if re.fullmatch(r"w\d+", token)]


def _write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def _run(*argv: str) -> None:
    status = main(list(argv))
    assert status == 0, f"realm-hf {' '.join(argv)} exited {status}"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """The three converted folders, a tiny corpus of the fixtures' words and questions about it."""
    root = tmp_path_factory.mktemp("converted_starts")
    for kind in ("embedder", "encoder", "scorer"):
        _run("convert", "--src", str(FIXTURES / kind), "--output", str(root / kind))
    words = _words()
    rng = random.Random(0)
    articles, questions = [], []
    for number in range(6):
        # capitalized and ended by a full stop, so that the sentence splitter (of ICT, of masking) finds four
        sentences = [" ".join(rng.choice(words[10:]) for _ in range(8)).capitalize() + "." for _ in range(4)]
        articles.append({"id": f"a{number}", "title": words[number], "text": " ".join(sentences)})
        first = sentences[0].lower().split()
        answer = first[2]
        questions.append({"id": number, "question": f"{words[number]} {first[0]} {first[1]}",
                          "answers": [answer], "answer_format": "text"})
    _write_jsonl(root / "corpus.jsonl", articles)
    _write_jsonl(root / "qa.jsonl", questions)
    return root


@pytest.fixture(scope="module")
def index(work) -> Path:
    """`realm-hf build-index --model <converted embedder>` (default block length: lowered to the model's 64)."""
    _run("build-index", "--model", str(work / "embedder"), "--corpus", str(work / "corpus.jsonl"),
         "--output", str(work / "index"), "--index-type", "torch-exact", "--dtype", "float32")
    return work / "index"


def _state(path: Path, prefix: str = "") -> dict[str, torch.Tensor]:
    return {name[len(prefix):]: value for name, value in load_file(path).items() if name.startswith(prefix)}


def test_convert_writes_realm_hf_models(work):
    types = {kind: json.loads((work / kind / "config.json").read_text())["model_type"]
             for kind in ("embedder", "encoder", "scorer")}
    assert types == {"embedder": "realm_retriever", "encoder": "realm_knowledge_encoder", "scorer": "realm_retriever"}
    retriever = json.loads((work / "embedder" / "config.json").read_text())
    assert (retriever["null_document_score"], retriever["pooling"], retriever["projection_layer_norm"]) == (
        "embedding", "pooler", True)
    assert retriever["block_max_length"] == retriever["query_max_length"] == 64


def test_build_index_with_the_converted_embedder(index):
    import datasets

    manifest = json.loads((index / "manifest.json").read_text())
    assert manifest["dim"] == 16 and manifest["num_blocks"] >= 6
    blocks = datasets.load_from_disk(str(index / "blocks"))
    assert max(len(ids) for ids in blocks["input_ids"]) <= 64  # the default 288 was lowered to the model's 64


def test_pretrain_starts_from_the_converted_scorer_and_encoder(work):
    output = work / "pretrain"
    _run(
        "pretrain", "--recipe", "paper", "--retriever", str(work / "scorer"), "--encoder", str(work / "encoder"),
        "--corpus", str(work / "corpus.jsonl"), "--output_dir", str(output), "--max_steps", "2",
        "--per_device_batch_size", "2", "--masking", "random_token", "--num_candidates", "3",
        "--refresh_schedule", "0", "--eval_mlm_examples", "0", "--index_type", "torch-exact", *QUIET,
    )
    history = [record for record in json.loads((output / "history.json").read_text()) if "loss" in record]
    assert [record["step"] for record in history] == [1, 2] and all(math.isfinite(r["loss"]) for r in history)
    # the lengths the run used: the defaults lowered to what the converted models take
    args = json.loads((output / "training_args.json").read_text())
    assert (args["block_length"], args["query_max_length"], args["joined_max_length"]) == (64, 32, 64)
    # the converted retriever's settings are kept, and its weights (2 small steps) were the start
    final = output / "final"
    retriever = json.loads((final / "retriever" / "config.json").read_text())
    assert (retriever["null_document_score"], retriever["pooling"], retriever["projection_layer_norm"]) == (
        "embedding", "pooler", True)
    start, trained = _state(work / "encoder" / "model.safetensors"), _state(final / "encoder" / "model.safetensors")
    for name, value in start.items():
        torch.testing.assert_close(trained[name], value, atol=1e-3, rtol=0)
    assert (final / "index" / "manifest.json").is_file()


def test_ict_starts_from_the_converted_embedder(work):
    output = work / "ict"
    _run(
        "ict", "--retriever", str(work / "embedder"), "--corpus", str(work / "corpus.jsonl"),
        "--output_dir", str(output), "--max_steps", "2", "--per_device_batch_size", "2", *QUIET,
    )
    config = json.loads((output / "final" / "config.json").read_text())
    assert config["model_type"] == "realm_retriever" and config["pooling"] == "pooler"


def test_finetune_from_the_converted_embedder_and_encoder(work, index, capsys):
    output = work / "finetune"
    qa = str(work / "qa.jsonl")
    _run(
        "finetune", "--retriever", str(work / "embedder"), "--encoder", str(work / "encoder"),
        "--index_dir", str(index), "--corpus", str(work / "corpus.jsonl"), "--train_file", qa, "--eval_file", qa,
        "--output_dir", str(output), "--max_steps", "2", "--per_device_batch_size", "2", "--top_k", "2",
        "--eval_batch_size", "3", *QUIET,
    )
    final = output / "final"
    config = json.loads((final / "config.json").read_text())
    # the saved model asks for questions as long as it was fine-tuned on; its reader reads the encoder's 64
    assert config["retriever_config"]["query_max_length"] == 32 and config["reader_config"]["max_length"] == 64
    assert config["retriever_config"]["null_document_score"] == "embedding"
    assert len((output / "eval_predictions.jsonl").read_text().splitlines()) == 6
    # the paper's start: the document tower (frozen) is the converted embedder's, the reader's BERT the encoder's
    weights = _state(final / "model.safetensors")
    for name, value in _state(work / "embedder" / "model.safetensors", "query_embedder.").items():
        torch.testing.assert_close(weights[f"retriever.doc_embedder.{name}"], value, atol=0, rtol=0)
    for name, value in _state(work / "encoder" / "model.safetensors", "bert.").items():
        torch.testing.assert_close(weights[f"reader.bert.{name}"], value, atol=1e-3, rtol=0)
    # and the fine-tuned model evaluates with the lengths it recorded
    capsys.readouterr()
    _run("evaluate", "--model", str(final), "--qa_file", qa, "--batch_size", "3", "--device", "cpu")
    assert json.loads(capsys.readouterr().out)["count"] == 6


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--block_length", "100", "--block_length 100 is longer than the model takes: block_max_length of the retriever"),
        ("--joined_max_length", "128", "--joined_max_length 128 is longer than the model takes: max_length of the reader"),
        ("--query_max_length", "64", "--query_max_length 64 leaves no room for a block in joined_max_length=64"),
    ],
)
def test_a_length_longer_than_the_converted_models_take_is_refused_in_one_line(work, option, value, message, capsys):
    qa = str(work / "qa.jsonl")
    status = main([
        "finetune", "--retriever", str(work / "embedder"), "--encoder", str(work / "encoder"),
        "--corpus", str(work / "corpus.jsonl"), "--train_file", qa, "--output_dir", str(work / "refused"),
        "--max_steps", "1", option, value, *QUIET,
    ])
    error = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and message in error[-1], error[-3:]
    assert error[-1].startswith("realm-hf finetune: error: ") and "traceback" not in error[-1]
    assert not (work / "refused" / "final").exists()
