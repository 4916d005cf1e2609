"""`pipeline("open-domain-question-answering", ...)` over a tiny saved RealmForOpenQA and its index."""

from __future__ import annotations

import copy
import logging
import math
import os

import pytest
import torch
from realm_pipeline_helpers import ARTICLES, QUERY_MAX_LENGTH, minilm_tokenizer
from transformers import pipeline

import realm_hf  # noqa: F401  (registers the tasks)
from realm_hf import OpenDomainQuestionAnsweringPipeline, RealmForOpenQA
from realm_hf.index import RealmIndex
from realm_hf.pipelines.open_qa import repeats_question

TASK = "open-domain-question-answering"
QUESTIONS = [
    "what is the capital of france?",
    "who developed the theory of general relativity",
    "which river flows through cairo",
    "what is the largest planet",
    "who created python",
]
TITLES = {article["title"] for article in ARTICLES}
ANSWER_KEYS = {"answer", "score", "span_score", "block_id", "title", "evidence", "start", "end", "documents"}


@pytest.fixture(scope="module")
def qa(open_qa_dir):
    return pipeline(TASK, model=open_qa_dir)


def _check_answer(result: dict, num_documents: int) -> None:
    assert set(result) == ANSWER_KEYS
    assert isinstance(result["answer"], str) and result["answer"].strip()
    assert 0.0 < result["score"] <= 1.0
    assert result["title"] in TITLES
    documents = result["documents"]
    assert len(documents) == num_documents
    for document in documents:
        assert set(document) == {"block_id", "title", "score", "text"}
    assert [d["score"] for d in documents] == sorted((d["score"] for d in documents), reverse=True)
    assert sum(d["score"] for d in documents) == pytest.approx(1.0, abs=1e-5)
    (source,) = [d for d in documents if d["block_id"] == result["block_id"]]
    assert source["title"] == result["title"]
    # the answer is cut from the block text by offsets: a substring of the evidence block, at [start, end)
    assert result["answer"] in source["text"]
    assert source["text"][result["start"] : result["end"]] == result["answer"]
    text, start, end = source["text"], result["start"], result["end"]
    assert result["evidence"] == f"{text[:start]}**{result['answer']}**{text[end:]}"
    # p(z|x) p(s|z,x) <= p(z|x), and <= p(y|x), its sum over the answer's spans
    assert result["span_score"] <= source["score"] + 1e-6
    assert result["span_score"] <= result["score"] + 1e-6


def test_task_is_registered_with_the_realm_model_class():
    from transformers.pipelines import PIPELINE_REGISTRY

    task, impl, _ = PIPELINE_REGISTRY.check_task(TASK)
    assert impl["impl"] is OpenDomainQuestionAnsweringPipeline
    assert impl["pt"] == (RealmForOpenQA,)


def test_pipeline_from_directory_returns_documented_keys(qa, open_qa_dir):
    assert isinstance(qa, OpenDomainQuestionAnsweringPipeline)
    assert qa.index.num_blocks == len(ARTICLES)  # found at <model dir>/index
    result = qa(QUESTIONS[0])
    assert isinstance(result, dict)
    _check_answer(result, num_documents=qa.model.config.top_k)
    # a dict input and the `question=` keyword give the same answer
    assert qa({"question": QUESTIONS[0]}) == result
    assert qa(question=QUESTIONS[0]) == result


def test_top_k_answers_and_num_blocks(qa):
    results = qa(QUESTIONS[1], top_k=3)
    assert isinstance(results, list) and len(results) == 3
    for result in results:
        _check_answer(result, num_documents=qa.model.config.top_k)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert len({r["answer"].lower() for r in results}) == 3  # duplicates of one answer text are merged
    assert results[0] == qa(QUESTIONS[1])  # the best of three is the top-1 answer

    more = qa(QUESTIONS[1], num_blocks=5)
    _check_answer(more, num_documents=5)
    # the retrieved set grows by appending lower-ranked blocks
    assert [d["block_id"] for d in more["documents"]][:1] == [d["block_id"] for d in results[0]["documents"]][:1]


def test_batched_results_equal_one_by_one(qa):
    one_by_one = qa(QUESTIONS, batch_size=1, top_k=2)
    batched = qa(QUESTIONS, batch_size=4, top_k=2)
    assert len(one_by_one) == len(batched) == len(QUESTIONS)
    for single, batch in zip(one_by_one, batched):
        assert [r["answer"] for r in single] == [r["answer"] for r in batch]
        assert [r["block_id"] for r in single] == [r["block_id"] for r in batch]
        assert [r["evidence"] for r in single] == [r["evidence"] for r in batch]
        assert [r["score"] for r in single] == pytest.approx([r["score"] for r in batch], rel=1e-4, abs=1e-6)
        for a, b in zip(single[0]["documents"], batch[0]["documents"]):
            assert a["block_id"] == b["block_id"]
            assert a["score"] == pytest.approx(b["score"], rel=1e-4, abs=1e-6)
    # and the pipeline's own single-call path agrees too
    assert qa(QUESTIONS[2], top_k=2)[0]["answer"] == one_by_one[2][0]["answer"]


def test_marginalize_answers_sums_the_spans_of_an_answer():
    """p(y|x) = Σ over the spans whose text is y (any block) of p(z|x) p(s|z,x): two weaker spans beat one strong."""
    import math

    from realm_hf.pipelines.open_qa import marginalize_answers

    log_scores = [math.log(0.4), math.log(0.3), math.log(0.25), float("-inf"), math.log(0.05)]
    texts = ["Marathi", "Portuguese", " portuguese\n", "Hindi", ""]
    ranked = marginalize_answers(log_scores, texts)
    assert [(key, best) for key, _, best in ranked] == [("portuguese", 1), ("marathi", 0)]
    assert [p for _, p, _ in ranked] == pytest.approx([0.55, 0.4])
    assert marginalize_answers([], []) == []
    # spans that exact match cannot tell apart are one answer ("The Nile" 0.2 + "Nile." 0.15 beat "Egypt" 0.3);
    # a span of an article alone is none
    log_scores = [math.log(0.3), math.log(0.2), math.log(0.15), math.log(0.1)]
    ranked = marginalize_answers(log_scores, ["Egypt", "The Nile", "Nile.", "the"])
    assert [(key, best) for key, _, best in ranked] == [("nile", 1), ("egypt", 0)]
    assert [p for _, p, _ in ranked] == pytest.approx([0.35, 0.3])


@pytest.mark.parametrize(
    ("answer", "question", "repeats"),
    [
        ("Cairo", "which river flows through cairo", True),
        ("Nile", "which river flows through cairo", False),
        ("the United States", "who was the first president of the united states", True),
        ("George Washington", "who was the first president of the united states", False),
        ("general relativity", "who developed the theory of general relativity", True),
        ("Albert Einstein", "who developed the theory of general relativity", False),
        ("Penicillins", "who discovered penicillin", True),  # a plural -s is dropped
        ("Atlantic Ocean", "which is the largest ocean", False),  # one new word is enough
        ("Portuguese language", "what language is spoken in brazil", False),
        ("1901", "who was president in 1901", True),
        ("the", "who wrote hamlet", True),  # no content word at all
        ("Class", "what is a clas", False),  # -ss is not a plural
    ],
)
def test_repeats_question(answer, question, repeats):
    assert repeats_question(answer, question) is repeats


def test_answers_repeating_the_question_are_left_out(qa):
    """With the filter (the default) no answer repeats its question while another candidate does not; without it, the
    ranking is the plain marginal one, and it does hold answers made of question words for these questions."""
    echoes = 0
    for question in QUESTIONS:
        filtered = qa(question, top_k=5)
        plain = qa(question, top_k=16, exclude_question_words=False)  # the same 64 spans as top_k=5
        kept = [r["answer"] for r in plain if not repeats_question(r["answer"], question)]
        echoes += len(plain) - len(kept)
        assert [r["answer"] for r in filtered] == (kept or [r["answer"] for r in plain])[:5]
    assert echoes > 0  # the check above compared something


def test_answer_marginalizes_spans_over_blocks(qa, open_qa_dir):
    """The top answer maximizes Σ_z p(z|x) Σ_{s∈S(z,y)} p(s|z,x) over the candidate spans, computed here by hand: y is
    a span's text as exact match compares it."""
    from realm_hf.data.answers import normalize_answer

    for question in QUESTIONS:
        model_inputs = qa.preprocess(question)
        outputs = qa.forward(model_inputs)
        result = qa.postprocess(outputs)
        block_ids = outputs["block_ids"][0].tolist()
        texts = qa.index.get_blocks(block_ids, columns=["text"])["text"]
        totals: dict[str, float] = {}
        best: dict[str, float] = {}
        best_text: dict[str, str] = {}
        for log_score, candidate, start, end in zip(
            outputs["answer_log_scores"][0].tolist(), outputs["answer_candidates"][0].tolist(),
            outputs["answer_char_starts"][0].tolist(), outputs["answer_char_ends"][0].tolist(),
        ):
            key = normalize_answer(texts[candidate][start:end])
            if key and log_score > float("-inf"):
                totals[key] = totals.get(key, 0.0) + math.exp(log_score)
                if math.exp(log_score) > best.get(key, 0.0):
                    best[key], best_text[key] = math.exp(log_score), texts[candidate][start:end]
        # answers that only repeat the question are left out (unless every one does)
        kept = {key: total for key, total in totals.items() if not repeats_question(best_text[key], question)} or totals
        top = max(kept, key=kept.get)
        assert normalize_answer(result["answer"]) == top and result["answer"] == best_text[top]
        assert result["score"] == pytest.approx(totals[top], rel=1e-4)
        assert result["span_score"] == pytest.approx(best[top], rel=1e-4)
    # relevance is computed from the embeddings stored in the index: equal to the MIPS scores
    query_embeds = qa.model.embed_queries(**{k: v.to(qa.device) for k, v in model_inputs.items()}).detach()
    mips_scores, _ = qa.index.search(query_embeds, qa.model.config.top_k)
    assert torch.allclose(outputs["relevance_scores"].cpu(), mips_scores.cpu(), atol=1e-4)


def test_model_instance_tokenizer_and_explicit_index(open_qa_dir, qa):
    loaded = RealmForOpenQA.from_pretrained(open_qa_dir)
    config = copy.deepcopy(loaded.config)
    config._name_or_path = ""  # a model built in memory: no directory to find a tokenizer or an index in
    in_memory = RealmForOpenQA(config)
    in_memory.load_state_dict(loaded.state_dict())
    tokenizer = minilm_tokenizer()
    with pytest.raises(ValueError, match="tokenizer"):
        pipeline(TASK, model=in_memory)
    with pytest.raises(FileNotFoundError, match="index"):
        pipeline(TASK, model=in_memory, tokenizer=tokenizer)
    explicit = pipeline(TASK, model=in_memory, tokenizer=tokenizer, index=os.path.join(open_qa_dir, "index"))
    assert explicit(QUESTIONS[0])["answer"] == qa(QUESTIONS[0])["answer"]
    index = RealmIndex.from_pretrained(os.path.join(open_qa_dir, "index"))
    assert pipeline(TASK, model=in_memory, tokenizer=tokenizer, index=index).index is index
    # an index passed to one call is used for that call only
    assert qa(QUESTIONS[0], index=index)["answer"] == qa(QUESTIONS[0])["answer"]


def test_bad_inputs_raise_clear_errors(qa):
    with pytest.raises(ValueError, match="empty"):
        qa("")
    with pytest.raises(ValueError, match="empty or only whitespace"):
        qa("   \n\t")
    with pytest.raises(ValueError, match="Question 1 of the batch is None"):
        qa([QUESTIONS[0], None])
    with pytest.raises(ValueError, match="Question 0 of the batch is empty"):
        qa(["  ", QUESTIONS[0]])
    with pytest.raises(ValueError, match="is None"):
        qa(None)
    with pytest.raises(TypeError, match="must be a string"):
        qa(42)
    with pytest.raises(ValueError, match="top_k"):
        qa(QUESTIONS[0], top_k=0)
    with pytest.raises(ValueError, match="num_blocks"):
        qa(QUESTIONS[0], num_blocks=-1)
    with pytest.raises(ValueError, match="context"):
        qa(QUESTIONS[0], context="Paris is the capital of France.")
    with pytest.raises(TypeError, match="unexpected"):
        qa(QUESTIONS[0], max_answer_len=3)
    assert qa([]) == []


def test_over_long_question_is_truncated_with_a_warning(qa, caplog):
    long_question = "who was the first person to walk on the moon " * 10
    with caplog.at_level(logging.WARNING, logger="realm_hf"):
        result = qa(long_question)
    assert any("query_max_length" in record.getMessage() for record in caplog.records)
    assert isinstance(result["answer"], str)
    # truncation is to the retriever's query length, and is what a pre-truncated question gives
    ids = qa.tokenizer(long_question)["input_ids"]
    assert len(ids) > QUERY_MAX_LENGTH
    assert qa.preprocess(long_question)["input_ids"].shape[1] == QUERY_MAX_LENGTH
    truncated = qa.tokenizer.decode(ids[1 : QUERY_MAX_LENGTH - 1])
    assert qa(truncated)["answer"] == result["answer"]


def test_question_answering_task_names_the_realm_call(open_qa_dir):
    """transformers v5 removed "question-answering" and rejects it before any registry is consulted: no routing is
    possible, but the error names the call that works."""
    model = RealmForOpenQA.from_pretrained(open_qa_dir)
    with pytest.raises(KeyError, match=r"pipeline\('realm-open-qa', model=\.\.\.\)"):
        pipeline("question-answering", model=model)


def test_short_task_name_is_the_same_pipeline(qa, open_qa_dir):
    short = pipeline("realm-open-qa", model=open_qa_dir)
    assert isinstance(short, OpenDomainQuestionAnsweringPipeline)
    assert short(QUESTIONS[0]) == qa(QUESTIONS[0])


class _IndexWithoutEmbeddings:
    """An index that only searches and returns blocks (like a sharded one): no `embeddings` / `store` to read."""

    def __init__(self, index: RealmIndex) -> None:
        self._index = index
        self.dim = index.dim

    def __len__(self) -> int:
        return len(self._index)

    def search(self, query_embeds, k, exclude=None):
        return self._index.search(query_embeds, k, exclude=exclude)

    def get_blocks(self, block_ids, columns=None):
        return self._index.get_blocks(block_ids, columns)


def test_index_without_stored_embeddings_embeds_blocks_with_the_document_tower(qa):
    """The index was built by this model's document tower, so re-embedding the blocks gives the same answers."""
    wrapped = _IndexWithoutEmbeddings(qa.index)
    expected = qa(QUESTIONS[:3], top_k=2)
    got = qa(QUESTIONS[:3], top_k=2, index=wrapped)
    for a, b in zip(expected, got):
        assert [r["answer"] for r in a] == [r["answer"] for r in b]
        assert [r["score"] for r in a] == pytest.approx([r["score"] for r in b], rel=1e-3, abs=1e-6)


def test_an_index_of_other_weights_is_refused_unless_check_fingerprint_is_off(qa, open_qa_dir, tmp_path):
    """Same dims, same blocks, another document tower: only the manifest's fingerprint tells it apart."""
    from realm_pipeline_helpers import make_open_qa_dir

    other_index = os.path.join(make_open_qa_dir(str(tmp_path / "other"), seed=1), "index")
    refused = r"was built by document-tower weights .* not by the retriever's document tower .* check_fingerprint=False"
    with pytest.raises(ValueError, match=refused):
        pipeline(TASK, model=open_qa_dir, index=other_index)
    with pytest.raises(ValueError, match=refused):
        qa(QUESTIONS[0], index=other_index)
    unchecked = pipeline(TASK, model=open_qa_dir, index=other_index, check_fingerprint=False)
    _check_answer(unchecked(QUESTIONS[0]), unchecked.model.config.top_k)
    _check_answer(unchecked(QUESTIONS[0], index=other_index), unchecked.model.config.top_k)  # a call's index too
    # the fingerprint recorded when fine-tuning started pairs the model with that index (shared towers move)
    paired = RealmForOpenQA.from_pretrained(open_qa_dir)
    paired.config.index_fingerprint = RealmIndex.from_pretrained(other_index).fingerprint
    assert pipeline(TASK, model=paired, index=other_index).index.fingerprint == paired.config.index_fingerprint
