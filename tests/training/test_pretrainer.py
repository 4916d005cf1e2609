"""A tiny REALM pre-training run (random 2-layer models, a few embedded articles) through the real trainer:
real faiss index, real background refreshes, real Accelerate checkpoints."""

import json
import os
import time

import pytest
import torch

pytest.importorskip("spacy")
pytest.importorskip("faiss")

from realm_hf import RealmKnowledgeEncoder, RealmRetriever
from realm_hf.index import RealmIndex
from realm_hf.index.manifest import fingerprint_module
from realm_hf.training import (
    CorpusArguments,
    LoopArguments,
    ModelArguments,
    PretrainingArguments,
    RealmPretrainer,
)


def make_trainer(output_dir, max_steps, refresh="4", resume=None, save_steps=0, logging_steps=2, model_kwargs=None,
                 save_total_limit=2, **pretraining_kwargs):
    loop = LoopArguments(
        output_dir=str(output_dir), max_steps=max_steps, per_device_batch_size=8, learning_rate=3e-3,
        logging_steps=logging_steps, save_steps=save_steps, report_to="none", resume_from_checkpoint=resume,
        save_total_limit=save_total_limit,
    )
    model = ModelArguments(random_init=True, **(model_kwargs or {}))
    corpus = CorpusArguments(
        corpus="embedded", max_articles=6, block_length=64, query_max_length=32, joined_max_length=96,
        embed_dtype="float32",
    )
    pretraining = PretrainingArguments(
        num_candidates=4, refresh_schedule=refresh, eval_mlm_examples=0, **{"refresh_mode": "thread", **pretraining_kwargs}
    )
    return RealmPretrainer(loop, model, corpus, pretraining)


def test_tiny_pretraining_loss_goes_down_and_refreshed_indexes_are_swapped_in(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=24)
    history = trainer.train()
    losses = [record["loss"] for record in history if "loss" in record]
    assert len(losses) == 12
    assert sum(losses[-3:]) / 3 < 0.9 * sum(losses[:3]) / 3, losses
    stats = trainer.refresher.stats
    assert len(stats) >= 2, stats
    assert all(s["staleness_steps"] >= 0 and s["build_seconds"] > 0 for s in stats)
    assert [s["snapshot_step"] for s in stats] == sorted(s["snapshot_step"] for s in stats)
    # the last index swapped in during training is the last refreshed one (the final save replaces it, see below)
    index_steps = [record["index_step"] for record in history if "index_step" in record]
    assert index_steps[-1] == stats[-1]["snapshot_step"] > 0
    # RU, null-document mass and staleness are logged
    logged = set().union(*history)
    assert {"ru_top", "ru_mean", "null_prior_mass", "refresh/staleness_steps"} <= logged
    # the learned null-document prior starts at p(∅|x) = 1/K (K = 4), whatever the scale of the inner products
    first = next(record for record in history if "null_prior_mass" in record)
    assert first["null_prior_mass"] == pytest.approx(0.25, abs=0.02)

    final = tmp_path / "final"
    retriever = RealmRetriever.from_pretrained(final / "retriever")
    RealmKnowledgeEncoder.from_pretrained(final / "encoder")
    index = RealmIndex.from_pretrained(final / "index")
    assert index.num_blocks == len(trainer.blocks) and index.dim == retriever.config.embedding_size
    # the final index is rebuilt from the final document tower, not the last (stale) refresh
    assert stats[-1]["snapshot_step"] < 24
    assert index.step == trainer.index.step == 24
    assert index.fingerprint == fingerprint_module(retriever.document_embedder)
    last_refresh = RealmIndex.from_pretrained(tmp_path / "index" / f"index-{stats[-1]['snapshot_step']}")
    assert index.fingerprint != last_refresh.fingerprint
    # the learned null-document prior is trained and saved
    assert retriever.config.null_document_score == "learned"
    assert retriever.null_document_logit.item() != 0.0
    # the output directory loads by its top-level path in transformers' pipeline()
    from transformers import pipeline

    import realm_hf

    realm_hf.register_auto_classes()  # realm_hf was imported before transformers' pipelines

    fill = pipeline("realm-fill-mask", model=str(final))
    assert len(fill(f"paris is the capital of {fill.tokenizer.mask_token}.", top_k=2)) == 2


def test_without_the_final_rebuild_the_stale_index_is_saved_with_a_warning(tmp_path, caplog):
    trainer = make_trainer(tmp_path, max_steps=2, refresh="0", rebuild_final_index=False)
    with caplog.at_level("WARNING", logger="realm_hf.training.pretrain"):
        trainer.train()
    assert "realm-hf build-index --corpus embedded --max-articles 6" in caplog.text and "stale" in caplog.text
    # the command names final/, not the temporary folder the save fills before renaming it into place
    assert f"--output {tmp_path / 'final' / 'index'} " in caplog.text and ".tmp-" not in caplog.text
    retriever = RealmRetriever.from_pretrained(tmp_path / "final" / "retriever")
    index = RealmIndex.from_pretrained(tmp_path / "final" / "index")
    assert index.step == 0 and index.fingerprint != fingerprint_module(retriever.document_embedder)


def test_trivial_candidate_is_excluded_and_null_document_comes_first(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=1, refresh="0")
    examples = [trainer.train_examples[i] for i in range(4)]
    batch, null_index = trainer.retrieve_and_collate(examples)
    assert null_index == 0
    assert (batch["candidate_block_ids"][:, 0] == -1).all()  # the null document
    sources = torch.tensor([e["source_block_id"] for e in examples])
    assert (sources >= 0).all()
    assert not (batch["candidate_block_ids"][:, 1:] == sources[:, None]).any()
    # without exclusion the source block would be among the candidates for most sentences
    query = trainer.retriever.embed_queries(batch["query_input_ids"], batch["query_attention_mask"])
    _, unrestricted = trainer.index.search(query.detach(), trainer.num_retrieved)
    assert (unrestricted == sources[:, None]).any()


def test_resume_continues_at_the_same_step_with_the_same_data(tmp_path, monkeypatch):
    # Dropout off: a resumed run draws its dropout masks from a global RNG stream that the DataLoader's iterator
    # creation shifts (see the issue note); data order, weights, optimizer and index are what this test pins down.
    from realm_hf.training import models

    monkeypatch.setattr(models, "TINY_BERT", dict(models.TINY_BERT, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    full = make_trainer(tmp_path / "full", max_steps=6, refresh="0", save_steps=3, logging_steps=1)
    reference = {r["step"]: r["loss"] for r in full.train() if "loss" in r}
    resumed = make_trainer(
        tmp_path / "full", max_steps=6, refresh="0", resume=str(tmp_path / "full" / "checkpoint-3"), logging_steps=1
    )
    history = resumed.train()
    continued = {r["step"]: r["loss"] for r in history if "loss" in r and r["step"] > 3}
    assert sorted(continued) == [4, 5, 6]
    for step, loss in continued.items():
        assert loss == pytest.approx(reference[step], rel=1e-4), (step, loss, reference[step])
    with open(tmp_path / "full" / "checkpoint-3" / "trainer_state.json") as f:
        assert json.load(f)["index_step"] == 0


def _retriever_state(trainer):
    return {k: v.detach().clone() for k, v in trainer.retriever.state_dict().items()}


def test_reading_warmup_reads_the_source_block_alone_with_the_retriever_frozen_then_the_retriever_learns(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=3, refresh="0", reading_warmup_steps=2, mlm_head_learning_rate=1e-2)
    examples = [trainer.train_examples[i] for i in range(4)]
    batch, null_index = trainer.collate_source_blocks(examples)
    assert null_index is None and batch["candidate_block_ids"].shape == (4, 1)  # no ∅, no retrieved block
    assert batch["candidate_block_ids"][:, 0].tolist() == [int(e["source_block_id"]) for e in examples]
    batch, null_index = trainer.retrieve_and_collate(examples)  # after the warm-up: REALM's candidates
    assert null_index == 0 and batch["candidate_block_ids"].shape == (4, 4)
    assert not (batch["candidate_block_ids"] == torch.tensor([int(e["source_block_id"]) for e in examples])[:, None]).any()
    # the MLM head has its own learning rate; the retriever's starts after the warm-up
    rates = {tuple(sorted(id(p) for p in g["params"])): g for g in trainer.optimizer.param_groups}
    head = {id(p) for n, p in trainer.model.named_parameters() if n.startswith("encoder.mlm_head.")}
    assert any(set(k) <= head and g["initial_lr"] == 1e-2 for k, g in rates.items())

    initial_retriever = _retriever_state(trainer)
    initial_encoder = {k: v.clone() for k, v in trainer.accelerator.unwrap_model(trainer.model).encoder.state_dict().items()}
    trainer.args.max_steps = 2
    trainer.train()
    after_warmup = _retriever_state(trainer)
    assert all(torch.equal(initial_retriever[k], after_warmup[k]) for k in initial_retriever)
    encoder = trainer.accelerator.unwrap_model(trainer.model).encoder.state_dict()
    assert any(not torch.equal(initial_encoder[k], encoder[k]) for k in initial_encoder)

    trainer = make_trainer(tmp_path / "longer", max_steps=4, refresh="0", reading_warmup_steps=2)
    initial_retriever = _retriever_state(trainer)
    trainer.train()
    changed = _retriever_state(trainer)
    assert any(not torch.equal(initial_retriever[k], changed[k]) for k in initial_retriever)


def test_held_out_evaluation_reports_reading_with_the_gold_block_apart_from_retrieval(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=1, refresh="0")
    sentences = trainer.train_examples.select(range(12))
    # gold = each sentence's own block, which X = Z retrieval excludes: never retrieved, yet read
    examples = sentences.add_column("gold_block_id", [int(i) for i in sentences["source_block_id"]])
    figures = trainer.evaluate_sentences(examples, fresh_index=False)
    assert figures["gold_top1"] == 0.0 and figures["gold_top3"] == 0.0 and figures["gold_prior_mass"] == 0.0

    from realm_hf.training.pretrain_evaluation import masked_token_hits

    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    hits = tokens = 0
    with torch.no_grad():
        for start in range(0, len(sentences), trainer.args.per_device_batch_size):
            chunk = list(sentences)[start : start + trainer.args.per_device_batch_size]
            batch, _ = trainer.collate_source_blocks(chunk)
            correct, _, count = masked_token_hits(model(batch, score_candidates=False), batch["labels"], None)
            hits, tokens = hits + correct, tokens + count
    assert tokens > 0
    assert figures["mlm_accuracy_gold_document"] == pytest.approx(100.0 * hits / tokens)
    # without gold blocks (a real corpus, X = Z) the same reading is reported against each sentence's own block
    source_figures = trainer.evaluate_sentences(sentences, fresh_index=False)
    assert "gold_top1" not in source_figures and "mlm_accuracy_gold_document" not in source_figures
    assert source_figures["mlm_accuracy_source_block"] == pytest.approx(100.0 * hits / tokens)


def test_any_of_several_gold_blocks_counts_as_the_right_document(tmp_path):
    """`gold_block_ids` (a second document stating the same fact) count as gold beside `gold_block_id`: ranked first
    when the retriever's top block is any of them, and reading alone still reads `gold_block_id`."""
    trainer = make_trainer(tmp_path, max_steps=1, refresh="0")
    sentences = trainer.train_examples.select(range(8))
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    with torch.no_grad():
        batch, null_index = trainer.retrieve_and_collate(list(sentences))
        prior = model(batch, null_candidate_index=null_index).retrieval_log_probs.cpu()  # [B, K]
    retrieved = batch["candidate_block_ids"].cpu()  # [B, K] (-1 for ∅)
    top = prior.masked_fill(retrieved < 0, float("-inf")).argmax(-1)  # [B]
    ranked = [[int(b) for b in row if b >= 0] for row in retrieved]
    top_block = [int(retrieved[i, top[i]]) for i in range(len(top))]
    others = [[b for b in row if b != t] for row, t in zip(ranked, top_block)]
    own = sentences.add_column("gold_block_id", [int(i) for i in sentences["source_block_id"]])  # never retrieved

    def figures(extra):
        return trainer.evaluate_sentences(own.add_column("gold_block_ids", extra), fresh_index=False)

    alone = trainer.evaluate_sentences(own, fresh_index=False)
    every = figures(ranked)
    assert every["gold_top1"] == 1.0 and every["gold_top3"] == 1.0
    # the top block among several retrieved gold blocks is what counts, not the first gold one in candidate order
    assert figures([[t] for t in top_block])["gold_top1"] == 1.0
    rest = figures(others)
    assert rest["gold_top1"] == 0.0 and rest["gold_top3"] == 1.0
    # the prior mass of every retrieved block: all but the null document's
    assert every["gold_prior_mass"] == pytest.approx((prior.exp() * (retrieved >= 0)).sum(-1).mean().item(), abs=1e-5)
    assert alone["gold_top1"] == 0.0 and alone["gold_prior_mass"] == 0.0
    assert every["mlm_accuracy_gold_document"] == alone["mlm_accuracy_gold_document"]


def test_length_buckets_reach_both_models_and_leave_the_loss_unchanged(tmp_path):
    bucketed = make_trainer(tmp_path / "bucketed", max_steps=1, refresh="0", model_kwargs={"length_buckets": 2})
    padded = make_trainer(tmp_path / "padded", max_steps=1, refresh="0")
    model = bucketed.accelerator.unwrap_model(bucketed.model)
    assert model.retriever.config.length_buckets == 2 and model.encoder.config.length_buckets == 2
    padded.accelerator.unwrap_model(padded.model).load_state_dict(model.state_dict())
    # one batch for both: the null document and blocks of several lengths
    batch, null_index = bucketed.retrieve_and_collate([bucketed.train_examples[i] for i in range(4)])
    assert batch["attention_mask"].sum(-1).unique().numel() > 1
    losses = []
    for trainer in (padded, bucketed):
        with torch.no_grad():
            losses.append(trainer.model.eval()(batch, null_candidate_index=null_index).loss)
    torch.testing.assert_close(losses[1], losses[0], atol=1e-5, rtol=1e-5)


def test_paced_refresh_builds_between_steps_and_swaps_in(tmp_path):
    # the builder runs only in the trainer's slices (half of its time here): refreshes still arrive, none in flight at
    # the end is left running (close() cancels it before the final rebuild). A build takes ~5 steps of trainer time on
    # an idle machine; 40 steps leave room for a slow first build on a loaded one (16 steps did not, once, in CI)
    trainer = make_trainer(tmp_path, max_steps=40, refresh="8", refresh_mode="paced", refresh_time_share=0.5)
    trainer.train()
    stats = trainer.refresher.stats
    assert stats and all(s["staleness_steps"] >= 1 for s in stats), stats
    assert [s["snapshot_step"] for s in stats] == sorted(s["snapshot_step"] for s in stats)
    assert trainer.refresher.time_share == 0.5 and not trainer.refresher.busy
    assert RealmIndex.from_pretrained(tmp_path / "final" / "index").step == 40


def test_index_versions_share_the_corpus_files_and_another_corpus_in_the_output_dir_is_refused(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=6, refresh="2", refresh_max_staleness=0)  # swaps at steps 2 and 4
    trainer.train()
    corpus = tmp_path / "corpus" / "blocks"
    arrow = sorted(name for name in os.listdir(corpus) if name.endswith(".arrow"))
    versions = sorted(tmp_path.glob("index/index-*")) + [tmp_path / "final" / "index"]
    assert arrow and [version.name for version in versions[:-1]] == ["index-2", "index-4"]  # keep_last=2
    # the corpus is stored once: every index version (refreshes, the final index) links its files
    assert all(os.path.samefile(corpus / name, version / "blocks" / name) for version in versions for name in arrow)

    # a new run (its outputs deleted) keeps the corpus copy, and checks it before any reuse
    loop = LoopArguments(output_dir=str(tmp_path), max_steps=1, report_to="none", overwrite_output_dir=True)
    with pytest.raises(ValueError, match="blocks of another corpus"):
        RealmPretrainer(
            loop, ModelArguments(random_init=True),
            CorpusArguments(corpus="embedded", max_articles=4, block_length=64, query_max_length=32,
                            joined_max_length=96, embed_dtype="float32"),
            PretrainingArguments(num_candidates=4, refresh_mode="thread"),
        )


def news_trainer(tmp_path, max_steps: int, **pretraining_kwargs) -> RealmPretrainer:
    """A tiny run whose pre-training corpus X is three news sentences (X != Z: Z is the embedded articles)."""
    corpus = tmp_path / "x.jsonl"
    news = ["Paris is the capital of France.", "It rains in London in November.", "Berlin hosted the games."]
    corpus.write_text("".join(json.dumps({"id": str(i), "title": "News", "text": t}) + "\n" for i, t in enumerate(news)))
    loop = LoopArguments(output_dir=str(tmp_path / "out"), max_steps=max_steps, per_device_batch_size=2,
                         report_to="none", logging_steps=1, save_steps=0)
    return RealmPretrainer(
        loop, ModelArguments(random_init=True),
        CorpusArguments(corpus="embedded", max_articles=4, block_length=64, query_max_length=32,
                        joined_max_length=96, embed_dtype="float32", pretraining_corpus=str(corpus)),
        PretrainingArguments(num_candidates=4, refresh_mode="thread", refresh_schedule="0", eval_mlm_examples=0,
                             **pretraining_kwargs),
    )


def test_reading_steps_with_another_pretraining_corpus_read_sentences_of_the_knowledge_corpus(tmp_path):
    trainer = news_trainer(tmp_path, max_steps=4, reading_warmup_steps=1, reading_loss_weight=0.5)
    corpus = tmp_path / "x.jsonl"
    assert not trainer.x_is_z and set(trainer.train_examples["source_block_id"]) == {-1}  # X: no block of Z
    z_sentences = trainer.reading.sentences_of_z
    assert len(z_sentences) > 4 and all(0 <= i < len(trainer.blocks) for i in z_sentences["source_block_id"])
    # step 0 (warm-up) and step 1's reading loss read the next sentences of Z in a seeded order, each with its own block
    x_batch = [trainer.train_examples[0], trainer.train_examples[1]]
    first, second = trainer.reading.examples(0, x_batch), trainer.reading.examples(1, x_batch)
    assert [e["source_block_id"] for e in first + second] == [
        z_sentences[int(i)]["source_block_id"] for i in trainer.reading.order[:4]
    ]
    batch, null_index = trainer.collate_source_blocks(first)
    assert null_index is None and batch["candidate_block_ids"][:, 0].tolist() == [e["source_block_id"] for e in first]
    history = trainer.train()
    assert [("retrieved_distinct" in r) for r in history if "loss" in r] == [False, True, True, True]
    # what a model card names: X (3 articles) and Z (its blocks), and the sentences of Z the reading steps read
    with open(tmp_path / "out" / "trainer_state.json") as f:
        state = json.load(f)
    command, data = state["command"], state["data"]
    assert command[:4] == ["realm-hf", "pretrain", "--output_dir", str(tmp_path / "out")]
    assert command[command.index("--pretraining_corpus") + 1] == str(corpus) and "--reading_loss_weight" in command
    assert data == {
        "x_is_z": False, "knowledge_corpus": "embedded", "knowledge_corpus_blocks": len(trainer.blocks),
        "pretraining_corpus": str(corpus), "pretraining_articles": 3, "masked_sentences": len(trainer.train_examples),
        "training_sentences": len(trainer.train_examples), "held_out_sentences": 0,
        "reading_sentences": len(z_sentences),
    }


def test_a_reading_loss_with_another_pretraining_corpus_reads_sentences_of_the_knowledge_corpus(tmp_path):
    trainer = news_trainer(tmp_path, max_steps=3, reading_loss_weight=1.0)
    z_sentences = trainer.reading.sentences_of_z
    assert z_sentences is not None and not trainer.x_is_z
    x_batch = [trainer.train_examples[0], trainer.train_examples[1]]
    read = trainer.reading.examples(1, x_batch)  # step 1 reads Z's sentences 2-3 of the seeded order
    assert [e["source_block_id"] for e in read] == [z_sentences[int(i)]["source_block_id"]
                                                   for i in trainer.reading.order[2:4]]
    history = trainer.train()
    assert [("reading_loss" in r, "retrieved_distinct" in r) for r in history if "loss" in r] == [(True, True)] * 3


def _step_loss_and_its_parts(trainer, step, examples, read):
    """Step `step`'s training loss and logs on `examples` (in eval mode, no dropout), with REALM's loss, the loss of
    reading `read` each with its own block alone, and that reading batch, each computed on its own."""
    trainer.model.eval()
    trainer.step = step
    with torch.no_grad():
        loss, logs = trainer.training_step(examples)
        batch, null_index = trainer.retrieve_and_collate(examples)
        realm = trainer.model(batch, null_candidate_index=null_index).loss
        own, _ = trainer.collate_source_blocks(read)
        reading = trainer.model(own, score_candidates=False).loss
    return loss, logs, realm, reading, own


def test_a_reading_loss_batch_size_reads_that_many_training_sentences_beside_realms_batch(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=2, refresh="0", logging_steps=1, reading_warmup_steps=1,
                           reading_loss_weight=0.5, reading_loss_batch_size=12)
    examples = [trainer.train_examples[i] for i in range(4)]
    read = trainer.reading.examples(1, examples)  # step 1 reads slice 1 of the seeded order of X's own sentences
    order = trainer.reading.order
    assert len(order) == len(trainer.train_examples) and len(read) == 12
    assert [e["source_block_id"] for e in read] == [
        trainer.train_examples[int(order[i % len(order)])]["source_block_id"] for i in range(12, 24)
    ]
    assert trainer.reading.examples(0, examples) is examples  # the warm-up reads the step's own batch
    loss, logs, realm, reading, own = _step_loss_and_its_parts(trainer, 1, examples, read)
    assert own["candidate_block_ids"].shape[0] == 12
    assert float(logs["reading_loss"]) == pytest.approx(float(reading), rel=1e-5)
    assert float(loss) == pytest.approx(float(realm + 0.5 * reading), rel=1e-5)



def test_a_ramped_reading_loss_weight_is_the_one_added_at_each_step_and_logged(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=3, refresh="0", logging_steps=1, reading_warmup_steps=1,
                           reading_loss_weight=0.5, reading_loss_weight_final=2.5)
    examples = [trainer.train_examples[i] for i in range(4)]
    for step, weight in ((1, 0.5), (2, 2.5)):  # REALM's first and last steps
        loss, logs, realm, reading, _ = _step_loss_and_its_parts(trainer, step, examples, examples)
        assert logs["reading_loss_weight"] == weight
        assert float(loss) == pytest.approx(float(realm + weight * reading), rel=1e-5)


def test_a_reading_loss_adds_the_own_block_reading_to_every_realm_step_and_the_retriever_learns_at_each(tmp_path):
    trainer = make_trainer(tmp_path / "a", max_steps=3, refresh="0", logging_steps=1, reading_warmup_steps=1,
                           reading_loss_weight=0.5)
    assert [trainer.retriever_learns(step) for step in range(3)] == [False, True, True]
    # one step's loss: REALM's marginal plus 0.5 times the masked-LM loss of each sentence read with its own block
    examples = [trainer.train_examples[i] for i in range(4)]
    loss, logs, realm, reading, own = _step_loss_and_its_parts(trainer, 1, examples, examples)
    assert own["candidate_block_ids"][:, 0].tolist() == [e["source_block_id"] for e in examples]
    assert float(logs["reading_loss"]) == pytest.approx(float(reading), rel=1e-5)
    assert float(loss) == pytest.approx(float(realm + 0.5 * reading), rel=1e-5)
    trainer.model.train()
    trainer.step = 0
    history = trainer.train()
    # logged at REALM's steps (2, 3), not at the warm-up's reading step; the retriever changed at both
    assert [("reading_loss" in r) for r in history if "loss" in r] == [False, True, True]
    with open(tmp_path / "a" / "trainer_state.json") as f:
        record = json.load(f)["retriever_learning"]
    assert record["steps_learning"] == 2


def test_a_negative_reading_loss_weight_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="reading_loss_weight"):
        PretrainingArguments(reading_loss_weight=-1.0)


def test_no_refresh_is_built_while_the_retriever_is_frozen(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=8, refresh="2", reading_warmup_steps=4)
    trainer.train()
    # the schedule asks at steps 2, 4, 6, 8: only the one after the warm-up is built (the others would copy index-0;
    # the last step's would be replaced by the final rebuild)
    assert [s["snapshot_step"] for s in trainer.refresher.stats] in ([6], [])
    assert not os.path.isdir(tmp_path / "index" / "index-2") and not os.path.isdir(tmp_path / "index" / "index-4")


def test_no_refresh_at_the_last_step_and_no_build_thread_outlives_training(tmp_path, caplog):
    """A refresh requested at the last step only competes with the final rebuild, and a build thread still running
    when the process exits aborts it inside CUDA work (seen on an H200: "terminate called without an active
    exception" after all of training had been saved)."""
    import threading

    caplog.set_level("INFO", logger="realm_hf")
    trainer = make_trainer(tmp_path, max_steps=6, refresh="3")
    trainer.train()
    started = [line for line in caplog.text.splitlines() if "Started index build" in line]
    assert len(started) == 1 and "snapshot step 3" in started[0]  # step 6, the last, asked for none
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("index-builder")]
    assert not trainer.refresher.busy


def test_a_build_thread_is_stopped_when_training_fails(tmp_path, monkeypatch):
    import threading

    import realm_hf.index.embedding as embedding
    from realm_hf.index.pacing import pause_point

    def slow_pause_point():  # a build of seconds: still running when training fails
        time.sleep(0.5)
        pause_point()

    monkeypatch.setattr(embedding, "pause_point", slow_pause_point)
    trainer = make_trainer(tmp_path, max_steps=6, refresh="2")
    original = trainer.on_step_end

    def fail_at_step_4(step):
        logs = original(step)
        if step == 4:
            raise RuntimeError("a failure in the middle of training (simulated)")
        return logs

    monkeypatch.setattr(trainer, "on_step_end", fail_at_step_4)
    with pytest.raises(RuntimeError, match="simulated"):
        trainer.train()
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("index-builder")]


def test_utility_gate_keeps_the_retriever_frozen_until_the_encoder_reads(tmp_path):
    # a gate no encoder can reach (10 nats of reading utility, the most a gate may ask): the retriever never learns, the encoder does
    trainer = make_trainer(tmp_path / "closed", max_steps=4, refresh="1", retriever_gate_utility=10.0,
                           retriever_gate_window=2)
    initial_retriever = _retriever_state(trainer)
    history = trainer.train()
    assert trainer.retriever_start_step is None
    assert all(torch.equal(initial_retriever[k], v) for k, v in _retriever_state(trainer).items())
    assert trainer.refresher.stats == []  # nothing to refresh: the document tower did not change
    gate_means = [r["ru_gate_window_mean"] for r in history if "ru_gate_window_mean" in r]
    assert gate_means and all(abs(m) < 10 for m in gate_means)
    assert all(r["retriever_learning"] == 0.0 for r in history if "retriever_learning" in r)

    # a gate every encoder passes: it opens once the window is full (2 steps), and the retriever learns from then
    trainer = make_trainer(tmp_path / "open", max_steps=4, refresh="0", retriever_gate_utility=-10.0,
                           retriever_gate_window=2)
    initial_retriever = _retriever_state(trainer)
    trainer.args.max_steps = 3  # steps 1-2 fill the window, the gate opens after step 2; step 3 warms the lr up from 0
    trainer.train()
    assert trainer.retriever_start_step == 2
    assert all(torch.equal(initial_retriever[k], v) for k, v in _retriever_state(trainer).items())
    state = trainer.extra_state()
    assert state["retriever_start_step"] == 2 and len(state["utility_window"]) == 2

    trainer = make_trainer(tmp_path / "open-longer", max_steps=4, refresh="0", retriever_gate_utility=-10.0,
                           retriever_gate_window=2)
    initial_retriever = _retriever_state(trainer)
    trainer.train()
    assert any(not torch.equal(initial_retriever[k], v) for k, v in _retriever_state(trainer).items())


def test_utility_gate_without_the_null_document_is_refused():
    with pytest.raises(ValueError, match="--retriever_gate_utility 0.1 measures reading against the null document"):
        PretrainingArguments(retriever_gate_utility=0.1, use_null_document=False)


@pytest.mark.parametrize("random_init", [True, False])
def test_projection_size_zero_keeps_berts_own_space(random_init):
    """`--projection_size 0` means no projection (as in Open-QA fine-tuning), for random and BERT-initialized towers."""
    from realm_hf.training.models import load_models

    model = ModelArguments(random_init=random_init, retriever="minilm", encoder="minilm", pooling="mean", projection_size=0)
    corpus = CorpusArguments(corpus="embedded", block_length=64, query_max_length=32, joined_max_length=96)
    retriever, _ = load_models(model, corpus, vocab_size=30522, mask_token_id=103)
    assert retriever.config.projection_size is None
    assert retriever.config.embedding_size == retriever.config.bert_config.hidden_size


@pytest.mark.parametrize("null_document_score", ["learned", "embedding"])
def test_held_out_figures_on_a_fresh_index_score_with_its_embeddings_as_the_tower_would(tmp_path, null_document_score):
    """On a fresh index the evaluation takes the candidates' embeddings from it instead of running the document tower
    again: the figures equal those of the same index's candidates embedded by the tower, ∅ included."""
    trainer = make_trainer(tmp_path, max_steps=1, refresh="0", null_document_score=null_document_score)
    model = trainer.accelerator.unwrap_model(trainer.model)
    with torch.no_grad():  # the document tower moves on; the training index is now stale
        generator = torch.Generator().manual_seed(0)
        for parameter in model.retriever.document_embedder.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    sentences = trainer.train_examples.select(range(12))
    with torch.no_grad():
        batch, _ = trainer.retrieve_and_collate(list(sentences), index=trainer._build_index_now(step=1, index_type="torch-exact"))
    retrieved = batch["candidate_block_ids"].cpu()  # [B, K] (-1 for ∅)
    examples = sentences.add_column("gold_block_id", [int(row[row >= 0][0]) for row in retrieved])
    stale = trainer.evaluate_sentences(examples, fresh_index=False)
    fresh = trainer.evaluate_sentences(examples, fresh_index=True)
    trainer.index = trainer._build_index_now(step=1, index_type="torch-exact")  # the tower re-embeds its candidates
    embedded = trainer.evaluate_sentences(examples, fresh_index=False)
    assert fresh["gold_prior_mass"] > 0
    assert fresh["gold_prior_mass"] != pytest.approx(stale["gold_prior_mass"], abs=1e-4)
    for name, value in embedded.items():
        assert fresh[name] == pytest.approx(value, abs=1e-5), name
