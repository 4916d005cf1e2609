"""Open-QA fine-tuning through the real trainer: tiny random models, a synthetic corpus, a fixed index."""

import json
import os

import pytest
import torch
from openqa_helpers import ARTICLES, QUESTIONS, TINY, load_tokenizer, write_jsonl
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf import (
    RealmForOpenQA,
    RealmKnowledgeEncoder,
    RealmKnowledgeEncoderConfig,
    RealmReader,
    RealmReaderConfig,
    RealmRetriever,
    RealmRetrieverConfig,
)
from realm_hf.data.openqa import model_inputs
from realm_hf.evaluation import evaluate_open_qa, load_open_qa, retrieve_and_collate
from realm_hf.hub import load_eval_results
from realm_hf.index import RealmIndex
from realm_hf.index.manifest import fingerprint_module
from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments
from realm_hf.training.models import load_open_qa_model, untie_retriever_towers
from realm_hf.training.openqa import OpenQaArguments, OpenQaTrainer


@pytest.fixture
def data(tmp_path):
    corpus = write_jsonl(tmp_path / "articles.jsonl", ARTICLES)
    qa = write_jsonl(tmp_path / "qa.jsonl", QUESTIONS)
    return corpus, qa


def make_trainer(output_dir, corpus, qa, max_steps=30, share_towers=True, untie=True, **openqa):
    loop = LoopArguments(
        output_dir=str(output_dir), max_steps=max_steps, per_device_batch_size=5, learning_rate=2e-3,
        logging_steps=3, save_steps=0, report_to="none", seed=0,
    )
    model = ModelArguments(random_init=True, pooling="mean", projection_size=16, share_towers=share_towers)
    corpus_args = CorpusArguments(
        corpus=corpus, block_length=64, query_max_length=32, joined_max_length=96, index_type="torch-exact",
        embed_dtype="float32", embed_batch_size=8,
    )
    args = OpenQaArguments(train_file=qa, eval_file=qa, top_k=3, untie_towers=untie, eval_batch_size=4, **openqa)
    return OpenQaTrainer(loop, model, corpus_args, args)


def test_fine_tuning_loss_goes_down_and_the_model_reloads_with_its_index(tmp_path, data):
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=30)
    model = trainer.open_qa_model
    # shared towers were untied: the frozen document tower is the one that built the index
    assert model.retriever.doc_embedder is not None and not model.config.retriever_config.share_towers
    assert not any(p.requires_grad for p in model.retriever.doc_embedder.parameters())
    # Open-QA retrieves no null document: its prior logit is frozen (DDP refuses unused trainable parameters)
    assert not model.retriever.null_document_logit.requires_grad
    doc_before = {k: v.clone() for k, v in model.retriever.doc_embedder.state_dict().items()}
    query_before = {k: v.clone() for k, v in model.retriever.query_embedder.state_dict().items()}
    assert trainer.index.fingerprint == fingerprint_module(model.retriever.doc_embedder)
    assert trainer.index.num_blocks == len(ARTICLES)

    history = trainer.train()
    records = [r for r in history if "loss" in r]
    losses = [r["loss"] for r in records]
    assert len(losses) == 10
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3, losses
    assert all(0 <= r["answerable"] <= 1 for r in records) and all("steps_per_second" in r for r in records)
    assert records[-1]["gold_retrieval_mass"] > 0 and records[-1]["answerable_loss"] > 0
    final_eval = history[-1]
    assert {"eval/exact_match", "eval/recall@3", "eval/answerable"} <= set(final_eval)
    assert os.path.isfile(tmp_path / "run" / "eval_predictions.jsonl")
    # the evaluation output a model card reads (realm_hf.hub.load_eval_results)
    written = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert written["exact_match"] == final_eval["eval/exact_match"] and written["retrieval"] == "dense"
    assert load_eval_results(tmp_path / "run" / "eval_results.json")[0]["metrics"]["recall@3"] == round(
        final_eval["eval/recall@3"], 2
    )

    # the query tower learned (gradients through the relevance scores), the document tower did not move
    model = trainer.open_qa_model
    for name, value in model.retriever.doc_embedder.state_dict().items():
        torch.testing.assert_close(value, doc_before[name])
    assert any(not torch.equal(v, query_before[k]) for k, v in model.retriever.query_embedder.state_dict().items())

    # the saved directory is a model + index bundle: index_repo_id="index" is a folder inside it
    final = tmp_path / "run" / "final"
    assert json.loads((final / "config.json").read_text())["index_repo_id"] == "index"
    assert (final / "index" / "manifest.json").is_file() and (final / "tokenizer.json").is_file()
    reloaded, tokenizer, index = load_open_qa(final)
    assert reloaded.config.top_k == 3 and index.num_blocks == len(ARTICLES)
    assert index.fingerprint == fingerprint_module(reloaded.retriever.document_embedder)
    for name, value in reloaded.state_dict().items():
        torch.testing.assert_close(value, model.state_dict()[name].to(value.device))  # trained on the GPU if any
    metrics, predictions = evaluate_open_qa(reloaded, tokenizer, index, QUESTIONS, progress=False)
    assert metrics["exact_match"] == final_eval["eval/exact_match"]
    # ten steps over ten questions are enough for a tiny reader to learn most answers
    assert metrics["exact_match"] >= 50, predictions


def test_gradients_reach_the_query_tower_through_the_relevance_scores(tmp_path, data):
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=1)
    batch = [dict(q) for q in QUESTIONS[:5]]
    loss, logs = trainer.training_step(batch)
    assert logs["answerable"] > 0 and loss.requires_grad
    loss.backward()
    model = trainer.open_qa_model
    query_grads = [p.grad for p in model.retriever.query_embedder.parameters() if p.grad is not None]
    assert query_grads and any(g.abs().sum() > 0 for g in query_grads)
    assert all(p.grad is None for p in model.retriever.doc_embedder.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.reader.parameters())


def test_a_frozen_retriever_stays_as_loaded_while_the_reader_trains(tmp_path, data):
    """`freeze_retriever` (the demo's choice with ~1,000 questions): no retriever weight moves, the reader learns."""
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=3, freeze_retriever=True)
    model = trainer.open_qa_model
    retriever_before = {name: p.detach().clone() for name, p in model.retriever.state_dict().items()}
    reader_before = {name: p.detach().clone() for name, p in model.reader.state_dict().items()}
    assert not any(p.requires_grad for p in model.retriever.parameters())
    trainer.train()
    for name, value in model.retriever.state_dict().items():
        assert torch.equal(value, retriever_before[name]), name
    assert any(not torch.equal(value, reader_before[name]) for name, value in model.reader.state_dict().items())


def test_a_globally_normalized_reader_is_saved_so_and_the_pipeline_weighs_blocks_by_it(tmp_path, data):
    """`span_normalization="global"` reaches the new reader, survives saving, and the Open-QA pipeline's block weights
    (its documents' scores) are the reader's `p(z|x)`: softmax of relevance + logsumexp of the block's span scores."""
    from transformers import pipeline

    import realm_hf

    realm_hf.register_auto_classes()  # realm_hf was imported before transformers' pipelines

    corpus, qa = data
    trainer = make_trainer(
        tmp_path / "run", corpus, qa, max_steps=3, freeze_retriever=True, span_normalization="global"
    )
    assert trainer.open_qa_model.config.reader_config.span_normalization == "global"
    trainer.train()
    final = tmp_path / "run" / "final"
    assert RealmForOpenQA.from_pretrained(final).config.reader_config.span_normalization == "global"
    answer = pipeline("realm-open-qa", model=str(final))
    outputs = answer.forward(answer.preprocess(QUESTIONS[0]["question"]))
    block_probs = outputs["block_log_probs"][0].exp()  # [k]
    assert not torch.allclose(block_probs, torch.softmax(outputs["relevance_scores"][0], -1), atol=1e-3)
    documents = answer.postprocess(outputs)["documents"]
    assert sorted(doc["score"] for doc in documents) == pytest.approx(sorted(block_probs.tolist()))
    plain = make_trainer(tmp_path / "plain", corpus, qa, max_steps=1).open_qa_model
    assert plain.config.reader_config.span_normalization == "block"


def test_a_retriever_built_for_fine_tuning_takes_the_similarity_scale(tmp_path, data):
    """`--similarity_scale 20 --normalize_embeddings` (examples/configs/openqa-cpu-nq.yaml): p(z|x) = softmax(20 cos)."""
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=1, normalize_embeddings=True, similarity_scale=20.0)
    retriever = trainer.open_qa_model.retriever
    assert retriever.config.normalize_embeddings and retriever.config.similarity_scale == 20.0


def test_the_evidence_steps_read_each_question_with_its_best_ranked_evidence_block(tmp_path, data):
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=3, evidence_steps=2, evidence_search_depth=6)
    questions = [dict(q) for q in QUESTIONS[:5]]
    ranked = trainer.retrieve_and_collate(questions)  # top_k = 3 of the 6 blocks
    deep = trainer.evidence_batch(questions)
    assert deep["reader_input_ids"].shape[1] == 1 and deep["candidate_embeds"].shape[1] == 1
    # every answer is in the corpus: with all 6 blocks searched, each question has its evidence block ...
    assert deep["answerable"].all()
    for b, question in enumerate(questions):
        block = deep["candidates"][b][0]
        assert any(answer in f"{block.title} {block.text}" for answer in question["answers"]), (question, block)
        assert (deep["start_positions"][b, 0] >= 0).any()  # ... with its gold span in it
    # ... and it is the best-ranked such block: where the top-3 holds one, the same block
    for b in range(len(questions)):
        gold = (ranked["start_positions"][b] >= 0).any(-1)  # [3]
        if gold.any():
            assert deep["candidate_block_ids"][b, 0] == ranked["candidate_block_ids"][b, gold.float().argmax()]

    # a warm-up step trains the reader alone; the step after it reads the top-k and trains the query tower
    loss, logs = trainer.training_step(questions)
    loss.backward()
    model = trainer.open_qa_model
    assert "gold_retrieval_mass" not in logs and logs["answerable"] == 1.0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.reader.parameters())
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.retriever.query_embedder.parameters())
    model.zero_grad()
    trainer.step = 2
    loss, logs = trainer.training_step(questions)
    loss.backward()
    assert "gold_retrieval_mass" in logs
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.retriever.query_embedder.parameters())


def test_evidence_negatives_are_the_best_ranked_blocks_without_an_answer_beside_the_evidence(tmp_path, data):
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=3, evidence_steps=2, evidence_search_depth=6,
                           evidence_negatives=2, span_normalization="global", freeze_retriever=True)
    questions = [dict(q) for q in QUESTIONS[:5]]
    with_negatives = trainer.evidence_batch(questions)
    trainer.openqa_args.evidence_negatives = 0
    alone = trainer.evidence_batch(questions)
    deep = retrieve_and_collate(trainer.open_qa_model, trainer.index, trainer.collator, questions, 6)  # the ranking
    assert with_negatives["reader_input_ids"].shape[1] == 3 and with_negatives["candidate_embeds"].shape[1] == 3
    assert len(with_negatives["candidates"][0]) == 3
    assert torch.equal(with_negatives["candidate_block_ids"][:, 0], alone["candidate_block_ids"][:, 0])  # evidence
    for b in range(len(questions)):
        ranking = deep["candidate_block_ids"][b].tolist()
        without_answer = [ranking[j] for j in range(6) if not (deep["start_positions"][b, j] >= 0).any()]
        assert with_negatives["candidate_block_ids"][b, 1:].tolist() == without_answer[:2]  # best-ranked first
        assert not (with_negatives["start_positions"][b, 1:] >= 0).any()  # negatives hold no gold span

    # the negatives take p(z|x) mass from the evidence block, so the same spans are less likely: a larger loss
    model = trainer.open_qa_model.eval()
    with torch.no_grad():
        loss_alone = model(**model_inputs(alone)).loss
        loss_with_negatives = model(**model_inputs(with_negatives)).loss
    assert loss_with_negatives > loss_alone + 1e-4


def test_rehearsed_reading_questions_are_read_with_their_evidence_beside_the_retrieved_training_questions(
    tmp_path, data
):
    corpus, qa = data
    reading = write_jsonl(tmp_path / "reading.jsonl", [dict(q, id=100 + q["id"]) for q in QUESTIONS[5:]])
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=3, evidence_search_depth=6, evidence_negatives=1,
                           span_normalization="global", freeze_retriever=True, rehearsal_file=reading,
                           max_rehearsal_questions=3)
    rehearsed = trainer.rehearsal_examples
    assert len(rehearsed) == 3 and all(e["rehearsal"] for e in rehearsed)  # a sample of the 5, marked
    assert {e["question"] for e in rehearsed} < {q["question"] for q in QUESTIONS[5:]}
    assert not any(e.get("rehearsal") for e in trainer.train_examples)
    questions = [dict(q) for q in QUESTIONS[:2]]

    trainer.open_qa_model.eval()  # no dropout: the same reads give the same losses
    with torch.no_grad():
        loss, logs = trainer.training_step(questions + rehearsed)
        retrieved, _ = trainer.read(questions, evidence=False)
        evidence, _ = trainer.read(rehearsed, evidence=True)
        rehearsed_as_retrieved, _ = trainer.read(rehearsed, evidence=False)
    # the step's loss is the mean over its 5 examples: 2 read with the top-3, 3 with evidence + 1 hard negative
    assert loss.item() == pytest.approx((2 * retrieved.item() + 3 * evidence.item()) / 5, rel=1e-5)
    assert evidence.item() != pytest.approx(rehearsed_as_retrieved.item(), rel=1e-3)
    assert {"rehearsal_loss", "answerable", "gold_retrieval_mass"} <= set(logs)
    assert logs["rehearsal_loss"] == pytest.approx(evidence.item(), rel=1e-5)
    with torch.no_grad():  # a batch of training questions alone is read as without rehearsal
        alone, alone_logs = trainer.training_step(questions)
    assert alone.item() == pytest.approx(retrieved.item(), rel=1e-5) and "rehearsal_loss" not in alone_logs


def test_max_rehearsal_questions_must_be_positive(tmp_path, data):
    corpus, qa = data
    with pytest.raises(ValueError, match="--max_rehearsal_questions 0 cannot be right: it must be at least 1"):
        make_trainer(tmp_path / "run", corpus, qa, max_steps=1, rehearsal_file=qa, max_rehearsal_questions=0)


def test_shared_towers_can_stay_shared_and_the_built_index_is_reused(tmp_path, data):
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=2, untie=False)
    assert trainer.open_qa_model.retriever.doc_embedder is None
    built = os.path.getmtime(tmp_path / "run" / "index" / "manifest.json")
    again = make_trainer(tmp_path / "run", corpus, qa, max_steps=2, untie=False)
    assert os.path.getmtime(tmp_path / "run" / "index" / "manifest.json") == built
    assert again.index.fingerprint == trainer.index.fingerprint
    # the shared tower moves, the index stays fixed; the saved config pairs the model with that index
    again.train()
    model, _, index = load_open_qa(tmp_path / "run" / "final")
    assert fingerprint_module(model.retriever.document_embedder) != index.fingerprint
    assert model.config.index_fingerprint == index.fingerprint == trainer.index.fingerprint


def test_an_index_built_by_other_weights_is_refused(tmp_path, data):
    corpus, qa = data
    tokenizer = load_tokenizer()
    other = RealmRetriever(RealmRetrieverConfig(
        bert_config=dict(TINY, vocab_size=len(tokenizer)), projection_size=16, pooling="mean",
        query_max_length=32, block_max_length=64,
    ))
    RealmIndex.build(ARTICLES, other, tokenizer=tokenizer, index_type="torch-exact", max_length=64).save_pretrained(
        tmp_path / "other-index"
    )
    with pytest.raises(ValueError, match="fingerprint"):
        make_trainer(tmp_path / "run", corpus, qa, index_dir=str(tmp_path / "other-index"))
    trainer = make_trainer(
        tmp_path / "run", corpus, qa, index_dir=str(tmp_path / "other-index"), check_index_fingerprint=False
    )
    assert trainer.index.num_blocks == len(ARTICLES)


def test_reader_starts_from_the_pretrained_knowledge_encoder(tmp_path):
    tokenizer = load_tokenizer()
    bert = dict(TINY, vocab_size=len(tokenizer))
    retriever = RealmRetriever(RealmRetrieverConfig(bert_config=bert, projection_size=16, query_max_length=32,
                                                    block_max_length=64))
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(bert_config=bert, max_length=96,
                                                                mask_token_id=tokenizer.mask_token_id))
    retriever.save_pretrained(tmp_path / "pretrained" / "retriever")
    encoder.save_pretrained(tmp_path / "pretrained" / "encoder")
    model = load_open_qa_model(
        OpenQaArguments(train_file="unused", model=str(tmp_path / "pretrained"), top_k=4),
        ModelArguments(), CorpusArguments(joined_max_length=96), len(tokenizer),
    )
    assert isinstance(model, RealmForOpenQA) and model.config.top_k == 4
    for name, value in encoder.bert.state_dict().items():
        torch.testing.assert_close(model.reader.bert.state_dict()[name], value)
    for name, value in retriever.state_dict().items():
        torch.testing.assert_close(model.retriever.state_dict()[name], value)
    # and a saved RealmForOpenQA loads as is, with the new top_k
    model.save_pretrained(tmp_path / "openqa")
    again = load_open_qa_model(
        OpenQaArguments(train_file="unused", model=str(tmp_path / "openqa"), top_k=2),
        ModelArguments(), CorpusArguments(), len(tokenizer),
    )
    assert again.config.top_k == 2


def test_bad_training_data_fails_before_training(tmp_path, data):
    corpus, _ = data
    long = write_jsonl(tmp_path / "long.jsonl", QUESTIONS + [{"question": "why " * 60, "answers": ["x"]}])
    with pytest.raises(ValueError, match=r"1 of 11 questions of .*long.jsonl are longer than query_max_length=32 .*id 10"):
        make_trainer(tmp_path / "run", corpus, long)
    empty = write_jsonl(tmp_path / "empty.jsonl", QUESTIONS + [{"question": " ", "answers": ["x"]}])
    with pytest.raises(ValueError, match="QA example 10 .* empty question"):
        make_trainer(tmp_path / "run", corpus, empty)
    assert not (tmp_path / "run" / "index").exists()


def test_untying_the_towers_keeps_every_retriever_weight():
    bert = dict(TINY, vocab_size=120, max_position_embeddings=512)
    config = RealmRetrieverConfig(bert_config=bert, projection_size=8, share_towers=True)
    shared = RealmRetriever(config)
    with torch.no_grad():
        shared.null_document_logit.fill_(1.5)
    model = RealmForOpenQA.from_components(shared, RealmReader(RealmReaderConfig(bert_config=bert)))
    untied = untie_retriever_towers(model).retriever
    assert untied.doc_embedder is not None
    assert untied.null_document_logit.item() == 1.5
    for tower in (untied.query_embedder, untied.doc_embedder):
        for name, value in tower.state_dict().items():
            torch.testing.assert_close(value, shared.query_embedder.state_dict()[name], rtol=0, atol=0)


def test_held_out_loss_is_evaluated_and_early_stopping_ends_a_flat_run(tmp_path, data):
    corpus, qa = data
    trainer = make_trainer(tmp_path / "run", corpus, qa, max_steps=30)
    # a threshold no change reaches: the second evaluation is already "flat", so training stops at step 4
    trainer.args.eval_steps = 2
    from realm_hf.training.early_stopping import EarlyStopping

    trainer.early_stopping = EarlyStopping("answerable_loss", patience=1, threshold=100.0)
    history = trainer.train()
    evaluations = [r for r in history if "eval/answerable_loss" in r]
    assert [r["step"] for r in evaluations] == [2, 4] and all(r["eval/answerable_loss"] > 0 for r in evaluations)
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    assert state["step"] == 4
    assert state["early_stopping"] == {
        "metric": "answerable_loss", "best": evaluations[0]["eval/answerable_loss"], "best_step": 2,
        "evaluations_without_improvement": 1, "stopped_at": 4,
    }
    assert (tmp_path / "run" / "final" / "config.json").is_file()  # the model of the last step is saved


@pytest.mark.parametrize("old, new", [
    ("reader_warmup_steps", "evidence_steps"),
    ("reader_warmup_depth", "evidence_search_depth"),
    ("reader_warmup_negatives", "evidence_negatives"),
])
def test_the_reader_warmup_options_are_refused_in_one_line_naming_their_new_name(old, new, tmp_path):
    """Fine-tuning's evidence steps are not pre-training's reading warm-up (`reading_warmup_steps`): new names."""
    from realm_hf.training.argument_parsing import parse_arguments
    from realm_hf.utils.options import UsageError

    types = (LoopArguments, ModelArguments, CorpusArguments, OpenQaArguments)
    with pytest.raises(UsageError, match=rf"^--{old} was removed: renamed: use --{new} \("):
        parse_arguments(types, ["--output_dir", "o", "--train_file", "t", f"--{old}", "2"])
    config = tmp_path / "old.yaml"
    config.write_text(f"{old}: 2\n")
    with pytest.raises(UsageError, match=rf"^--{old} \(a key of .*\) was removed: renamed: use --{new} "):
        parse_arguments(types, ["--output_dir", "o", "--train_file", "t", "--config", str(config)])
    parsed = parse_arguments(types, ["--output_dir", "o", "--train_file", "t", f"--{new}", "2"])
    assert getattr(parsed[-1], new) == 2
