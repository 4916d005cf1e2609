"""A converted old `RealmForOpenQA` folder answers as the old classes did: one `realm-hf convert`, then the pipeline and
`realm-hf ask`, compared with the answers transformers 4.57 itself wrote (`tests/fixtures/old_realm/openqa_answers.json`,
by `tests/fixtures/make_old_realm_reference.py`): the same retrieved blocks in the same order, the same relevance
scores, the same reader input, the same (block, start, end) and the same decoded answer string, for every question.
The answer strings compared are those of the old docs' own usage, `AutoTokenizer` (`RealmTokenizerFast`)
`.decode(predicted_answer_ids)`; the slow `RealmTokenizer` put a space before punctuation (`"##ing , w13"`).
Nothing here rebuilds the old rule: the converted model's own predictions are compared with the old outputs.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import pipeline

import realm_hf  # noqa: F401 (registers the task)
from realm_hf import RealmForOpenQA, RealmIndex
from realm_hf.cli import main as realm_hf_main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old_realm"
OLD = FIXTURES / "openqa"
GOLDENS = json.loads((FIXTURES / "openqa_answers.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    """`realm-hf convert --src OLD --output NEW`, as a user types it (in this process)."""
    output = tmp_path_factory.mktemp("converted") / "orqa"
    assert realm_hf_main(["convert", "--src", str(OLD), "--output", str(output)]) == 0
    return output


@pytest.fixture(scope="module")
def qa(converted):
    return pipeline("realm-open-qa", model=str(converted))


def test_the_goldens_are_worth_comparing():
    """At least 20 questions, answers from several blocks, some of several wordpieces, some cut inside a word."""
    assert len(GOLDENS) >= 20
    assert len({golden["predicted_block_id"] for golden in GOLDENS}) >= 3
    assert any(len(golden["predicted_answer_ids"]) > 1 for golden in GOLDENS)
    assert any(golden["starts_inside_word"] or golden["ends_inside_word"] for golden in GOLDENS)


def test_one_command_gives_a_folder_that_answers(converted):
    assert (converted / "model.safetensors").is_file() and (converted / "index" / "manifest.json").is_file()
    assert not list(converted.rglob("*.npy")) or all(path.name == "embeddings.npy" for path in converted.rglob("*.npy"))
    record = json.loads((converted / "conversion.json").read_text())
    assert record["kind"] == "openqa" and record["old_class"] == "RealmForOpenQA" and record["answer_rule"] == "best_span"
    model = RealmForOpenQA.from_pretrained(converted)
    assert model.config.answer_rule == "best_span" and model.config.reader_config.span_normalization == "global"
    index = RealmIndex.from_pretrained(converted / "index")
    assert index.fingerprint == model.config.index_fingerprint and index.manifest.provenance["blocks"]
    old_records = np.load(OLD / "block_records.npy", allow_pickle=True)  # the test may unpickle its own fixture
    assert index.get_blocks(list(range(len(old_records))), columns=["text"])["text"] == [r.decode() for r in old_records]


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda golden: f"q{golden['index']}")
def test_pipeline_answers_as_the_old_classes(qa, golden):
    result = qa(golden["question"])
    assert result["answer"] == golden["predicted_answer_fast"]
    assert result["block_id"] == golden["predicted_block_id"]
    assert sorted(doc["block_id"] for doc in result["documents"]) == sorted(golden["retrieved_block_ids"])


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda golden: f"q{golden['index']}")
def test_retrieval_and_reader_positions_match(qa, golden):
    with torch.no_grad():
        outputs = qa._forward(qa.preprocess(golden["question"]))
    assert qa.preprocess(golden["question"])["input_ids"][0].tolist() == golden["question_input_ids"]
    assert outputs["block_ids"][0].tolist() == golden["retrieved_block_ids"]  # the same blocks, in the same order
    torch.testing.assert_close(
        outputs["relevance_scores"][0], torch.tensor(golden["retrieved_logits"]), rtol=0, atol=1e-5
    )
    block = int(outputs["answer_candidates"][0, 0])
    assert block == golden["block_idx"]
    reader_ids = outputs["reader_input_ids"][0, block]
    assert reader_ids[: len(golden["predicted_block_input_ids"])].tolist() == golden["predicted_block_input_ids"]
    assert (int(outputs["answer_starts"][0, 0]), int(outputs["answer_ends"][0, 0])) == (
        golden["start_pos"], golden["end_pos"]
    )


def test_batched_pipeline_gives_the_same_answers(qa):
    results = qa([golden["question"] for golden in GOLDENS], batch_size=8)
    assert [result["answer"] for result in results] == [golden["predicted_answer_fast"] for golden in GOLDENS]


def test_ask_answers_as_the_old_classes(converted, capsys):
    golden = next(golden for golden in GOLDENS if golden["ends_inside_word"] or golden["starts_inside_word"])
    assert realm_hf_main(["ask", "--model", str(converted), golden["question"]]) == 0
    out = capsys.readouterr().out
    assert f"A: {golden['predicted_answer_fast']}  (score" in out


def test_the_goldens_tell_the_rules_apart(converted, qa):
    """The comparison can fail: realm_hf's own rule, or a reader normalized per block, answers otherwise."""
    marginal = [qa(golden["question"], answer_rule="marginal")["answer"] for golden in GOLDENS]
    assert sum(answer != golden["predicted_answer_fast"] for answer, golden in zip(marginal, GOLDENS)) >= 3
    model = RealmForOpenQA.from_pretrained(converted)
    model.reader.config.span_normalization = "block"
    per_block = pipeline("realm-open-qa", model=model, tokenizer=qa.tokenizer, index=str(converted / "index"))
    answers = [per_block(golden["question"])["answer"] for golden in GOLDENS]
    assert sum(answer != golden["predicted_answer_fast"] for answer, golden in zip(answers, GOLDENS)) >= 1


# ---------------------------------------------------------------------------------------------------------------
# What convert refuses, in one line, with nothing run and nothing overwritten
# ---------------------------------------------------------------------------------------------------------------


def old_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "old"
    shutil.copytree(OLD, copy)
    return copy


def error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip() and " - " not in line[:40]]


class _RunsACommand:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_a_command_is_refused(tmp_path, capsys):
    old = old_copy(tmp_path)
    marker = tmp_path / "ran"
    header = (old / "block_records.npy").read_bytes()
    header = header[: header.index(b"\n") + 1]  # the .npy header of the real file, then another pickle
    (old / "block_records.npy").write_bytes(header + pickle.dumps(_RunsACommand(str(marker)), protocol=2))
    status = realm_hf_main(["convert", "--src", str(old), "--output", str(tmp_path / "new")])
    lines = error_lines(capsys)
    assert status != 0 and not marker.exists() and not (tmp_path / "new").exists()
    assert len(lines) == 1 and "block_records.npy" in lines[0] and "byte " in lines[0] and "system" in lines[0], lines


def test_an_existing_output_is_refused_unless_asked(tmp_path, capsys, converted):
    output = tmp_path / "new"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    assert realm_hf_main(["convert", "--src", str(OLD), "--output", str(output)]) != 0
    lines = error_lines(capsys)
    assert len(lines) == 1 and "--overwrite" in lines[0] and (output / "keep.txt").read_text() == "mine"
    assert realm_hf_main(["convert", "--src", str(OLD), "--output", str(output), "--overwrite"]) == 0
    assert not (output / "keep.txt").exists() and (output / "index" / "manifest.json").is_file()


def test_missing_records_are_named_and_no_corpus_converts_the_weights(tmp_path, capsys):
    old = old_copy(tmp_path)
    (old / "block_records.npy").unlink()
    assert realm_hf_main(["convert", "--src", str(old), "--output", str(tmp_path / "new")]) != 0
    lines = error_lines(capsys)
    assert len(lines) == 1 and "block_records.npy" in lines[0] and "--no-corpus" in lines[0]
    assert realm_hf_main(["convert", "--src", str(old), "--output", str(tmp_path / "new"), "--no-corpus"]) == 0
    assert (tmp_path / "new" / "model.safetensors").is_file() and not (tmp_path / "new" / "index").exists()


def test_records_of_another_corpus_are_refused(tmp_path, capsys):
    old = old_copy(tmp_path)
    records = np.load(OLD / "block_records.npy", allow_pickle=True)
    np.save(old / "block_records.npy", records[:-1])  # one record fewer than block_emb has rows
    assert realm_hf_main(["convert", "--src", str(old), "--output", str(tmp_path / "new")]) != 0
    lines = error_lines(capsys)
    assert len(lines) == 1 and f"{len(records) - 1} records" in lines[0] and f"{len(records)} rows" in lines[0]


def test_index_type_flag(tmp_path):
    output = tmp_path / "new"
    assert realm_hf_main(["convert", "--src", str(OLD), "--output", str(output), "--index-type", "torch-exact"]) == 0
    assert RealmIndex.from_pretrained(output / "index").index_type == "torch-exact"
    qa = pipeline("realm-open-qa", model=str(output))
    assert qa(GOLDENS[0]["question"])["answer"] == GOLDENS[0]["predicted_answer_fast"]


def test_realm_hf_rule_answers_whole_words(converted, qa):
    """Under realm_hf's own rule a span never begins on a `##` piece nor stops before one (the goldens do, 26 of 48
    ends: the old rule keeps them)."""
    continuation = {i for token, i in qa.tokenizer.get_vocab().items() if token.startswith("##")}
    for golden in GOLDENS:
        with torch.no_grad():
            outputs = qa._forward(qa.preprocess(golden["question"]), answer_rule="marginal", top_k=5)
        ids = outputs["reader_input_ids"][0]  # [k, L]
        kept = outputs["answer_log_scores"][0] > float("-inf")
        for block, start, end in zip(outputs["answer_candidates"][0][kept], outputs["answer_starts"][0][kept],
                                     outputs["answer_ends"][0][kept]):
            assert int(ids[block, start]) not in continuation
            assert end + 1 >= ids.shape[-1] or int(ids[block, end + 1]) not in continuation
        answer = qa(golden["question"], answer_rule="marginal")["answer"]
        assert answer is None or not answer.startswith("##")
