"""`mixed_precision` / `embed_dtype` "auto": bf16 only where this machine runs it faster, decided by a real probe."""

import json
import os
import subprocess

import pytest
import torch
from fault_helpers import two_process_launch
from openqa_helpers import ARTICLES, QUESTIONS, write_jsonl
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments
from realm_hf.training.openqa import OpenQaArguments, OpenQaTrainer
from realm_hf.utils.precision import (
    BF16_MIN_SPEEDUP,
    autocast_dtype,
    cpu_bf16_speedup,
    resolve_embed_dtype,
    resolve_mixed_precision,
)


def test_the_probe_measures_once_and_leaves_the_random_state_alone():
    cpu_bf16_speedup.cache_clear()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    speedup = cpu_bf16_speedup(batch_size=2, length=16, repeats=2)
    assert torch.equal(torch.rand(3), expected)  # the probe's model init did not consume the caller's generator
    assert 0.05 < speedup < 20  # a ratio of two timings of the same work, not a time
    assert cpu_bf16_speedup(batch_size=2, length=16, repeats=2) == speedup  # cached: measured once per process


def test_auto_takes_bf16_on_a_cpu_exactly_when_the_probe_finds_it_faster():
    chosen = resolve_mixed_precision("auto", "cpu")
    assert chosen == ("bf16" if cpu_bf16_speedup() >= BF16_MIN_SPEEDUP else "no")
    assert resolve_mixed_precision("auto", "mps") == "no"


@pytest.mark.parametrize("value", ["no", "bf16", "fp16"])
def test_a_named_precision_is_kept(value):
    assert resolve_mixed_precision(value, "cpu") == value


def test_an_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"mixed_precision='bf32'.*no, bf16, fp16, auto"):
        resolve_mixed_precision("bf32", "cpu")


def test_embed_dtype_auto_follows_training_and_names_map_to_autocast_dtypes():
    assert [resolve_embed_dtype("auto", p) for p in ("bf16", "fp16", "no")] == ["bfloat16", "float16", "float32"]
    assert resolve_embed_dtype("float32", "bf16") == "float32"  # a named dtype wins
    assert autocast_dtype("bfloat16") is torch.bfloat16 and autocast_dtype("float32") is None
    assert autocast_dtype(None) is None
    with pytest.raises(ValueError, match="embed_dtype='bfloat17'"):
        autocast_dtype("bfloat17")


def test_a_trainer_given_auto_trains_and_embeds_in_the_probed_precision_and_records_it(tmp_path):
    corpus = write_jsonl(tmp_path / "articles.jsonl", ARTICLES)
    qa = write_jsonl(tmp_path / "qa.jsonl", QUESTIONS)
    loop = LoopArguments(output_dir=str(tmp_path / "run"), max_steps=1, per_device_batch_size=5, save_steps=0,
                         report_to="none", mixed_precision="auto")
    corpus_args = CorpusArguments(corpus=corpus, block_length=64, query_max_length=32, joined_max_length=96,
                                  index_type="torch-exact", embed_dtype="auto", embed_batch_size=8)
    trainer = OpenQaTrainer(loop, ModelArguments(random_init=True, pooling="mean", projection_size=16),
                            corpus_args, OpenQaArguments(train_file=qa, top_k=3))
    expected = resolve_mixed_precision("auto", "cpu")
    assert trainer.accelerator.mixed_precision == expected
    assert trainer.corpus_args.embed_dtype == resolve_embed_dtype("auto", expected)
    trainer.train()
    saved = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert saved["mixed_precision"] == expected  # the run says what it ran, not "auto"


def test_a_second_trainer_in_the_same_process_may_take_another_precision(tmp_path):
    """accelerate keeps one precision per process; a trainer after one in fp32 still trains in bf16 (and back)."""
    corpus = write_jsonl(tmp_path / "articles.jsonl", ARTICLES)
    qa = write_jsonl(tmp_path / "qa.jsonl", QUESTIONS)
    for number, precision in enumerate(("no", "bf16", "no")):
        loop = LoopArguments(output_dir=str(tmp_path / f"run{number}"), max_steps=1, per_device_batch_size=5,
                             save_steps=0, report_to="none", mixed_precision=precision)
        corpus_args = CorpusArguments(corpus=corpus, block_length=64, query_max_length=32, joined_max_length=96,
                                      index_type="torch-exact", embed_dtype="float32", embed_batch_size=8)
        trainer = OpenQaTrainer(loop, ModelArguments(random_init=True, pooling="mean", projection_size=16),
                                corpus_args, OpenQaArguments(train_file=qa, top_k=3))
        assert trainer.accelerator.mixed_precision == precision
        assert trainer.train()[-1]["loss"] > 0


AGREE_SCRIPT = """
import json, logging, os, sys
from realm_hf.training.arguments import LoopArguments
from realm_hf.training.loop import make_accelerator
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
accelerator = make_accelerator(LoopArguments(output_dir=sys.argv[1], mixed_precision="auto", report_to="none"))
rank, chosen = accelerator.process_index, accelerator.mixed_precision
accelerator.end_training()  # as every trainer ends
threads = [open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task")]
# one write (the ranks share the pipe; print() may write the line and its newline apart)
sys.stdout.write(json.dumps({"rank": rank, "chosen": chosen, "threads": threads}) + "\\n")
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="lists the process's threads in /proc (Linux)")
def test_two_processes_take_the_main_process_choice_and_end_without_gloo_threads(tmp_path):
    """Under `accelerate launch` (2 gloo processes) only rank 0 probes, and both ranks train in its choice. After
    `end_training` no gloo thread is left: one that outlives the script may free a collective's tensors while the
    interpreter exits and abort the process after its work (the probe's BERT, imported with the group up, kept the
    group alive in rank 0 until `make_accelerator` imported torch.distributed.fsdp before creating it)."""
    script = tmp_path / "agree.py"
    script.write_text(AGREE_SCRIPT)
    command, env = two_process_launch(str(script), str(tmp_path / "out"))
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert len({r["chosen"] for r in results}) == 1 and results[0]["chosen"] in ("no", "bf16")
    assert done.stderr.count("mixed_precision auto:") == 1  # one probe, on the main process
    for result in results:
        assert not [name for name in result["threads"] if "gloo" in name], result


def test_build_index_auto_embeds_in_the_probed_dtype(tmp_path):
    """`realm-hf build-index` defaults to `--dtype auto`: the same embeddings as naming the probed dtype."""
    import numpy as np

    from realm_hf.retrieval import build_index

    corpus = write_jsonl(tmp_path / "articles.jsonl", ARTICLES)
    probed = resolve_embed_dtype("auto", resolve_mixed_precision("auto", "cpu"))
    other = "float32" if probed == "bfloat16" else "bfloat16"
    embeddings = {
        dtype: np.asarray(build_index(corpus, "minilm", str(tmp_path / dtype), index_type="torch-exact",
                                      block_length=64, dtype=dtype).embeddings)
        for dtype in ("auto", probed, other)
    }
    assert np.array_equal(embeddings["auto"], embeddings[probed])
    assert not np.array_equal(embeddings["auto"], embeddings[other])  # the dtype matters, so the test can tell
