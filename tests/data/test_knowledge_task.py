"""The synthetic knowledge task of benchmarks/bench_knowledge.py: facts live only in the right document, held-out
sentences cannot be answered from memorized training sentences, and the tagger masks exactly the fact."""

import os
import subprocess
import sys

import pytest

from realm_hf.data.knowledge_task import ATTRIBUTES, KnowledgeValueTagger, make_knowledge_task
from realm_hf.data.masking import build_masked_dataset


def test_the_task_is_deterministic_and_every_fact_is_in_its_document_only():
    task = make_knowledge_task(num_entities=20, seed=3)
    assert task == make_knowledge_task(num_entities=20, seed=3)
    assert task != make_knowledge_task(num_entities=20, seed=4)
    assert len(task.documents) == 20 and len({d["title"] for d in task.documents}) == 20
    for sentence in task.train_sentences + task.held_out_sentences:
        document = task.documents[sentence["entity"]]
        assert sentence["value"] in document["text"].split(" ") or f"{sentence['value']}." in document["text"]
        assert sentence["value"] in ATTRIBUTES[sentence["attribute"]]


def test_the_task_is_the_same_in_every_process():
    """String hashing differs from process to process (PYTHONHASHSEED): nothing may depend on a set's order. (Names
    once came out of a set in hash order, so the benchmark's start moved from run to run: 0.27-0.36.)"""
    code = (
        "import json, sys; from realm_hf.data.knowledge_task import make_knowledge_task; "
        "t = make_knowledge_task(num_entities=30, seed=0); "
        "sys.stdout.write(json.dumps([t.documents, t.train_sentences, t.held_out_sentences, t.values]))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": hash_seed}, capture_output=True,
            text=True, check=True,
        ).stdout
        for hash_seed in ("1", "2", "3")
    }
    assert len(outputs) == 1


def test_held_out_sentences_ask_unseen_facts_with_unseen_templates():
    task = make_knowledge_task(num_entities=30, seed=0)
    trained = {(s["entity"], s["attribute"]) for s in task.train_sentences}
    held_out = {(s["entity"], s["attribute"]) for s in task.held_out_sentences}
    assert trained and held_out and not trained & held_out  # memorizing training sentences cannot answer them
    strip = lambda s: s["text"].replace(s["value"], "<v>").replace(task.documents[s["entity"]]["title"], "<n>")
    assert not {strip(s) for s in task.train_sentences} & {strip(s) for s in task.held_out_sentences}
    assert {s["reference"] for s in task.train_sentences + task.held_out_sentences} == {"name"}
    for sentence in task.train_sentences + task.held_out_sentences:
        assert sentence["text"].startswith(task.documents[sentence["entity"]]["title"]) or (
            f" {task.documents[sentence['entity']]['title']}" in sentence["text"]
        )


def test_the_relational_variant_names_people_through_their_teacher_in_held_out_sentences():
    task = make_knowledge_task(num_entities=30, seed=0, relational=True)
    trained = {(s["entity"], s["attribute"]) for s in task.train_sentences}
    held_out = {(s["entity"], s["attribute"]) for s in task.held_out_sentences}
    assert trained and held_out and not trained & held_out  # memorizing training sentences cannot answer them
    strip = lambda s: s["text"].replace(s["value"], "<v>").replace(task.documents[s["entity"]]["title"], "<n>")
    assert not {strip(s) for s in task.train_sentences} & {strip(s) for s in task.held_out_sentences}
    assert {s["reference"] for s in task.held_out_sentences} == {"teacher"}
    assert {s["reference"] for s in task.train_sentences} == {"name", "teacher"}
    teacher_of = {i: d["text"].split("taught by ")[1].split(",")[0] for i, d in enumerate(task.documents)}
    for sentence in task.held_out_sentences:
        # named through the teacher: the person's own name is absent, the teacher's is there ...
        assert task.documents[sentence["entity"]]["title"] not in sentence["text"]
        assert f"student of {teacher_of[sentence['entity']]}" in sentence["text"]
        # ... and only the person's own document says who taught them
        holders = [i for i, teacher in teacher_of.items() if teacher == teacher_of[sentence["entity"]]]
        assert holders == [sentence["entity"]]


def test_teachers_form_one_cycle_so_everyone_teaches_exactly_one_person():
    task = make_knowledge_task(num_entities=12, seed=1)
    teachers = [d["text"].split("taught by ")[1].split(",")[0] for d in task.documents]
    titles = [d["title"] for d in task.documents]
    assert sorted(teachers) == sorted(titles)
    assert all(teacher != title for teacher, title in zip(teachers, titles))


def test_the_value_tagger_masks_exactly_the_fact(tokenizer):
    task = make_knowledge_task(num_entities=10, seed=0)
    sentences = task.train_sentences[:40]
    masked = build_masked_dataset(sentences, tokenizer, tagger=KnowledgeValueTagger(task.values))
    assert len(masked) == len(sentences)
    for row, sentence in zip(masked, sentences):
        targets = [tokenizer.convert_ids_to_tokens(t) for t in row["labels"] if t != -100]
        assert targets == [sentence["value"]]


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="num_entities must be at least 2"):
        make_knowledge_task(num_entities=1)
