"""The news variant of the hard knowledge task (benchmarks/bench_x_not_z.py): pre-training sentences that are no
sentences of Z and combine facts, a second document per person so that X = Z can find a fact elsewhere, held-out
sentences that only retrieval answers, and the masked span the one each sentence asks."""

import re

import pytest

from realm_hf.corpus import split_into_blocks
from realm_hf.data.knowledge_task import KnowledgeValueTagger
from realm_hf.data.knowledge_task_hard import HARD_ATTRIBUTES, make_hard_knowledge_task
from realm_hf.data.knowledge_task_news import NewsValueTagger, make_news_knowledge_task
from realm_hf.data.masking import build_masked_dataset
from realm_hf.demo.knowledge_runs import KNOWLEDGE_TASK_SHAPES, held_out_examples

ATTRIBUTE_OF = {value: attribute for attribute, values in HARD_ATTRIBUTES.items() for value in values}


def _facts(text: str, tagger: KnowledgeValueTagger) -> dict[str, str]:
    """attribute -> value of every value the text states."""
    return {ATTRIBUTE_OF[text[s:e]]: text[s:e] for s, e in tagger([text])[0]}


def _sentences(text: str) -> set[str]:
    return {s.strip() for s in re.split(r"(?<=\.)\s+", text) if s.strip()}


def test_the_task_is_seeded_and_each_person_has_a_record_and_a_profile_stating_the_same_facts():
    task = make_news_knowledge_task(num_entities=40, seed=3)
    assert task == make_news_knowledge_task(num_entities=40, seed=3)
    assert task != make_news_knowledge_task(num_entities=40, seed=4)
    hard = make_hard_knowledge_task(num_entities=40, seed=3)
    # Z: the hard task's records and distractors as they are, and 40 profiles between them
    assert task.documents[:40] == hard.documents[:40] and task.documents[80:] == hard.documents[40:]
    tagger = KnowledgeValueTagger(task.values)
    for i in range(40):
        record, profile = task.documents[i], task.documents[40 + i]
        assert profile["title"] == record["title"] and profile["id"] == f"profile-{i}"
        assert _facts(profile["text"], tagger) == _facts(record["text"], tagger)
        assert len(_facts(record["text"], tagger)) == len(HARD_ATTRIBUTES)
        assert not _sentences(profile["text"]) & _sentences(record["text"])  # other words


def test_news_sentences_combine_true_facts_are_no_sentences_of_z_and_never_state_the_held_out_fact():
    task = make_news_knowledge_task(num_entities=60, seed=0)
    tagger = KnowledgeValueTagger(task.values)
    z_sentences = set().union(*(_sentences(d["text"]) for d in task.documents))
    truth = {i: _facts(task.documents[i]["text"], tagger) for i in range(60)}
    unseen = {s["entity"]: s["attribute"] for s in task.held_out_sentences}
    stated = {i: set() for i in range(60)}
    for sentence in task.train_sentences + task.held_out_sentences:
        i = sentence["entity"]
        facts = _facts(sentence["text"], tagger)
        assert sentence["documents"] == [i, 60 + i]
        assert task.documents[i]["title"] in sentence["text"] and sentence["text"] not in z_sentences
        assert 2 <= len(facts) <= 3 and facts.items() <= truth[i].items()  # several facts, all of them true
        assert facts[sentence["attribute"]] == sentence["value"]
        if sentence in task.train_sentences:
            stated[i] |= set(facts)
    assert all(unseen[i] not in stated[i] for i in range(60))
    assert any(len(_facts(s["text"], tagger)) == 3 for s in task.train_sentences)
    # held-out: the held-out attribute asked, beside a fact that training sentences state, in unseen wording
    for sentence in task.held_out_sentences:
        facts = _facts(sentence["text"], tagger)
        assert sentence["attribute"] == unseen[sentence["entity"]] and set(facts) - {sentence["attribute"]} <= stated[
            sentence["entity"]]

    def frame(s):  # the sentence without its name and values
        for value in _facts(s["text"], tagger).values():
            s = {**s, "text": s["text"].replace(value, "<v>")}
        return s["text"].replace(task.documents[s["entity"]]["title"], "<n>")

    def words(texts):
        return {w for t in texts for w in re.findall(r"[a-z]+", t.lower())} - {"n", "v"}

    train_frames = {frame(s) for s in task.train_sentences}
    held_out_frames = {frame(s) for s in task.held_out_sentences}
    assert not train_frames & held_out_frames
    # the held-out phrases' telling words appear in no training sentence
    assert {"address", "paid", "vet", "door", "final"} <= words(held_out_frames) - words(train_frames)


def test_the_masked_span_is_the_value_the_sentence_asks(tokenizer):
    task = make_news_knowledge_task(num_entities=30, seed=1)
    sentences = task.train_sentences + task.held_out_sentences
    tagger = NewsValueTagger(task.values, sentences)
    masked = build_masked_dataset(sentences, tokenizer, tagger=tagger, query_max_length=32)
    assert len(masked) == len(sentences)
    for row, sentence in zip(masked, sentences):
        assert len(row["input_ids"]) <= KNOWLEDGE_TASK_SHAPES["query_max_length"]  # one window: the name is in it
        targets = [tokenizer.convert_ids_to_tokens(t) for t in row["labels"] if t != -100]
        assert tokenizer.convert_tokens_to_string(targets) == sentence["value"]
    # every value of a sentence is a salient span: without the targets another fact would be masked as often
    anyone = build_masked_dataset(sentences, tokenizer, tagger=KnowledgeValueTagger(task.values), query_max_length=32)
    other = sum(tokenizer.decode([t for t in row["labels"] if t != -100]) != s["value"]
                for row, s in zip(anyone, sentences))
    assert other > len(sentences) // 4
    # Z's text (not a sentence of the task) is tagged as by KnowledgeValueTagger: every value
    mention = task.documents[-1]["text"]
    assert tagger([mention]) == KnowledgeValueTagger(task.values)([mention])
    assert tagger.fingerprint != NewsValueTagger(task.values, sentences[:-1]).fingerprint


def test_every_document_is_one_block_and_held_out_sentences_are_gold_for_both_documents(tokenizer):
    task = make_news_knowledge_task(num_entities=200, seed=0)
    blocks = split_into_blocks(task.documents, tokenizer, max_length=KNOWLEDGE_TASK_SHAPES["block_length"])
    assert len(blocks) == len(task.documents)  # block ids are document positions
    tagger = NewsValueTagger(task.values, task.train_sentences + task.held_out_sentences)
    held_out = held_out_examples(task, tokenizer, KNOWLEDGE_TASK_SHAPES["query_max_length"], tagger=tagger)
    assert held_out["gold_block_id"] == [s["entity"] for s in task.held_out_sentences]
    assert held_out["gold_block_ids"] == [[200 + s["entity"]] for s in task.held_out_sentences]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="sentences_per_fact must be in"):
        make_news_knowledge_task(num_entities=5, sentences_per_fact=4)
    with pytest.raises(ValueError, match="two values to mask"):
        NewsValueTagger(("paris", "pilot"), [{"text": "A pilot in paris.", "value": "paris"},
                                             {"text": "A pilot in paris.", "value": "pilot"}])
