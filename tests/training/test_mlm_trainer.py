"""`realm-hf mlm`: masked-LM training of the encoder's start. Its masking (BERT's 15 % and 80/10/10, whole words), its
held-out split by article, a run whose held-out accuracy rises, and its output taken by the other jobs as a BERT."""

import json
import os

import datasets
import pytest
import torch
from transformers import AutoTokenizer, BertForMaskedLM

from realm_hf.data.mlm import MlmCollator, mask_wordpieces, split_held_out_articles
from realm_hf.modeling.initial_weights import resolve_bert_path
from realm_hf.modeling import RealmKnowledgeEncoder
from realm_hf.training import CorpusArguments, LoopArguments, MlmArguments, ModelArguments
from realm_hf.training.entry_points import main_mlm
from realm_hf.training.mlm import MlmTrainer

MASK, VOCAB = 3, 1000


def test_bert_masking_proportions():
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(10, VOCAB, (64, 256), generator=generator)
    maskable = torch.ones_like(input_ids, dtype=torch.bool)
    maskable[:, 0] = maskable[:, -1] = False  # [CLS] ... [SEP]
    masked, labels = mask_wordpieces(input_ids, maskable, MASK, VOCAB, 0.15, generator)
    chosen = labels != -100
    assert not chosen[:, 0].any() and not chosen[:, -1].any()
    assert 0.14 < chosen.float().mean() < 0.16
    assert torch.equal(labels[chosen], input_ids[chosen]) and torch.equal(masked[~chosen], input_ids[~chosen])
    as_mask = (masked[chosen] == MASK).float().mean()
    kept = (masked[chosen] == input_ids[chosen]).float().mean()
    assert 0.77 < as_mask < 0.83 and 0.07 < kept < 0.13  # 80 % [MASK], 10 % random (rarely the same id), 10 % kept


def test_whole_word_masking_takes_every_piece_of_a_word():
    continuation = torch.zeros(VOCAB, dtype=torch.bool)
    continuation[500:] = True  # ids >= 500 continue a word ("##...")
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(10, VOCAB, (32, 128), generator=generator)
    maskable = torch.ones_like(input_ids, dtype=torch.bool)
    _, labels = mask_wordpieces(input_ids, maskable, MASK, VOCAB, 0.15, generator, continuation)
    chosen = labels != -100
    continues = continuation[input_ids]
    # a continuation piece is chosen exactly when the piece before it is (they belong to one word)
    assert torch.equal(chosen[:, 1:][continues[:, 1:]], chosen[:, :-1][continues[:, 1:]])
    assert chosen.any()


def test_every_row_gets_a_label_even_when_no_draw_chose_one():
    input_ids = torch.tensor([[1, 20, 21, 2, 0, 0]])
    maskable = torch.tensor([[False, True, True, False, False, False]])
    for seed in range(20):
        _, labels = mask_wordpieces(input_ids, maskable, MASK, VOCAB, 0.01, torch.Generator().manual_seed(seed))
        assert (labels != -100).sum() >= 1 and (labels[~maskable] == -100).all()


def test_held_out_articles_are_never_trained_on():
    blocks = datasets.Dataset.from_dict({"article_id": [str(i // 3) for i in range(30)], "block_id": list(range(30))})
    train, held_out = split_held_out_articles(blocks, 2, seed=0)
    assert len(held_out) == 6 and len(train) == 24
    assert not set(train["article_id"]) & set(held_out["article_id"])
    with pytest.raises(ValueError, match="eval_articles=10"):
        split_held_out_articles(blocks, 10, seed=0)


def test_collator_cuts_long_blocks_and_masks_no_special_token():
    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    encoded = tokenizer("a title", "some body text that goes on for a while, longer than the cut", truncation=True)
    examples = [{"input_ids": encoded["input_ids"], "token_type_ids": encoded["token_type_ids"]},
                {"input_ids": encoded["input_ids"][:6] + [tokenizer.sep_token_id], "token_type_ids": [0] * 7}]
    collator = MlmCollator(tokenizer, max_length=12, seed=0)
    batch = collator(examples)
    assert batch["input_ids"].shape == (2, 12) and batch["attention_mask"][1].sum() == 7
    assert batch["input_ids"][0, -1] == tokenizer.sep_token_id  # the cut block still ends in [SEP]
    labelled = batch["labels"] != -100
    special = torch.isin(batch["input_ids"], torch.tensor([tokenizer.cls_token_id, tokenizer.pad_token_id]))
    assert not (labelled & special).any() and labelled.any(dim=1).all()
    assert torch.equal(collator(examples)["labels"], batch["labels"])  # seeded: the same masks every call
    with pytest.raises(ValueError, match="mlm_probability=1.5"):
        MlmCollator(tokenizer, max_length=12, probability=1.5)


def test_mlm_training_raises_held_out_accuracy_and_saves_a_bert(tmp_path):
    trainer = MlmTrainer(
        LoopArguments(output_dir=str(tmp_path), max_steps=120, per_device_batch_size=8, learning_rate=2e-3,
                      logging_steps=10, save_steps=0, eval_on_start=True, report_to="none"),
        ModelArguments(random_init=True),
        CorpusArguments(corpus="embedded", max_articles=40, block_length=64),
        MlmArguments(eval_articles=4, mlm_head_learning_rate=3e-3),
    )
    history = trainer.train()
    evaluations = [record for record in history if "eval/mlm_accuracy" in record]
    assert [record["step"] for record in evaluations] == [0, 120]
    assert evaluations[-1]["eval/mlm_loss"] < evaluations[0]["eval/mlm_loss"] - 1.0, evaluations
    assert evaluations[-1]["eval/mlm_accuracy"] > evaluations[0]["eval/mlm_accuracy"] + 3.0, evaluations
    # a plain BertForMaskedLM with its tokenizer: the head is kept by the encoder built from it
    final = tmp_path / "final"
    assert json.loads((final / "config.json").read_text())["model_type"] == "bert"
    masked_lm = BertForMaskedLM.from_pretrained(final)
    encoder = RealmKnowledgeEncoder.from_bert(str(final), max_length=64, mask_token_id=103)
    assert torch.equal(encoder.mlm_head.predictions.transform.dense.weight, masked_lm.cls.predictions.transform.dense.weight)
    assert encoder.get_output_embeddings().weight.data_ptr() == encoder.bert.embeddings.word_embeddings.weight.data_ptr()
    assert os.path.isfile(final / "tokenizer.json")


def test_the_head_learns_at_its_own_rate(tmp_path):
    trainer = MlmTrainer(
        LoopArguments(output_dir=str(tmp_path), max_steps=1, per_device_batch_size=4, learning_rate=1e-4,
                      save_steps=0, report_to="none"),
        ModelArguments(random_init=True),
        CorpusArguments(corpus="embedded", max_articles=10, block_length=64),
        MlmArguments(eval_articles=2, mlm_head_learning_rate=1e-3),
    )
    rates = sorted({group["initial_lr"] for group in trainer.optimizer.param_groups})
    assert rates == [1e-4, 1e-3]
    head = {id(p) for name, p in trainer.unwrapped_model().named_parameters() if name.startswith("masked_lm.cls.")}
    for group in trainer.optimizer.param_groups:
        assert all((id(p) in head) == (group["initial_lr"] == 1e-3) for p in group["params"])


def test_the_command_refuses_a_realm_encoder_as_its_start(tmp_path, capsys):
    encoder_dir = tmp_path / "encoder"
    encoder_dir.mkdir()
    (encoder_dir / "config.json").write_text(json.dumps({"model_type": "realm_knowledge_encoder"}))
    with pytest.raises(ValueError, match="already trained as a masked LM"):
        main_mlm(["--output_dir", str(tmp_path / "out"), "--encoder", str(encoder_dir), "--corpus", "embedded",
                  "--max_articles", "10", "--report_to", "none", "--max_steps", "1"])
