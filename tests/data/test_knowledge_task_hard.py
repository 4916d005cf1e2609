"""The hard knowledge task (benchmarks/bench_knowledge.py --task hard): the gold document is one of many blocks that
share its person's name or name parts and its relation words, the facts are stated only there, and multi-token values
are masked whole."""

import re

import pytest

from realm_hf.data.knowledge_task import KnowledgeValueTagger
from realm_hf.data.knowledge_task_hard import HARD_ATTRIBUTES, make_hard_knowledge_task
from realm_hf.data.masking import build_masked_dataset


def _states(text: str, value: str) -> bool:
    return re.search(rf"\b{re.escape(value)}\b", text) is not None


def test_the_gold_document_is_one_of_many_that_name_the_person():
    task = make_hard_knowledge_task(num_entities=60, mentions_per_entity=2, namesakes_per_entity=2, seed=1)
    assert task == make_hard_knowledge_task(num_entities=60, mentions_per_entity=2, namesakes_per_entity=2, seed=1)
    assert len(task.documents) == 60 * 5 and len({d["title"] for d in task.documents[:60]}) == 60
    people = task.documents[:60]
    for document in people:
        name = document["title"]
        first, last = name.split(" ")
        mentions = [d for d in task.documents[60:] if name in d["text"]]
        namesakes = [d for d in task.documents if d["title"] != name and (
            d["title"].startswith(first + " ") or d["title"].endswith(" " + last))]
        assert len(mentions) >= 2 and namesakes  # the full name elsewhere, and its parts in other titles
    # every fact of a sentence is stated in its person's document, with the document's own (other) wording
    for sentence in task.train_sentences + task.held_out_sentences:
        document = task.documents[sentence["entity"]]
        assert sentence["value"] in HARD_ATTRIBUTES[sentence["attribute"]]
        assert _states(document["text"], sentence["value"]) and document["title"] in sentence["text"]
        words = set(sentence["text"].lower().replace(".", "").split()) - set(sentence["value"].split())
        words -= set(document["title"].lower().split())
        assert not words & {"resides", "employed", "keeps", "prefers", "competes"}  # documents' verbs only there


def test_held_out_sentences_ask_unseen_facts_with_unseen_templates_and_multi_token_values():
    task = make_hard_knowledge_task(num_entities=50, seed=0)
    trained = {(s["entity"], s["attribute"]) for s in task.train_sentences}
    held_out = {(s["entity"], s["attribute"]) for s in task.held_out_sentences}
    assert trained and held_out and not trained & held_out
    strip = lambda s: s["text"].replace(s["value"], "<v>").replace(task.documents[s["entity"]]["title"], "<n>")
    assert not {strip(s) for s in task.train_sentences} & {strip(s) for s in task.held_out_sentences}
    assert any(" " in s["value"] for s in task.held_out_sentences)


def test_multi_token_values_are_masked_whole(tokenizer):
    task = make_hard_knowledge_task(num_entities=30, seed=0)
    sentences = [s for s in task.train_sentences if " " in s["value"]][:30]
    masked = build_masked_dataset(sentences, tokenizer, tagger=KnowledgeValueTagger(task.values))
    assert len(masked) == len(sentences)
    for row, sentence in zip(masked, sentences):
        targets = [tokenizer.convert_ids_to_tokens(t) for t in row["labels"] if t != -100]
        assert tokenizer.convert_tokens_to_string(targets) == sentence["value"] and len(targets) >= 2


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="num_entities must be at least 2"):
        make_hard_knowledge_task(num_entities=1)
    with pytest.raises(ValueError, match="mentions_per_entity and namesakes_per_entity must be >= 0"):
        make_hard_knowledge_task(num_entities=5, mentions_per_entity=-1)


def test_named_sentences_sets_how_often_a_document_names_its_person():
    for named in (1, 3):
        task = make_hard_knowledge_task(num_entities=10, mentions_per_entity=0, namesakes_per_entity=0, seed=2,
                                        named_sentences=named)
        for document in task.documents:
            attribute_sentences = [s for s in document["text"].split(". ") if "learned their trade" not in s]
            assert sum(s.startswith(document["title"]) or f" {document['title']} " in s
                       for s in attribute_sentences) == named
