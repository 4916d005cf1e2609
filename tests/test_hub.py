"""Hub publishing and loading, without network.

Downloads run the real `huggingface_hub` / transformers resolution code against a Hugging Face cache populated in
a temporary directory (`models--org--name/{blobs,refs,snapshots}` with `HF_HUB_OFFLINE=1`); uploads patch only
`HfApi.create_repo` and `HfApi.create_commit` and check the exact operations.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import huggingface_hub
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi, ModelCard
from transformers import AutoConfig, AutoModel
from transformers import pipeline as transformers_pipeline

import markdown_blocks
from hub_helpers import FakeHub, added, install_fake_hub
import realm_hf
import realm_hf.hub
from realm_hf import RealmForOpenQA, RealmForOpenQAConfig
from realm_hf.cli import main as cli_main
from realm_hf.hub import (
    add_remote_code,
    check_index_matches_model,
    index_bundle_patterns,
    load_eval_results,
    record_index_pairing,
    render_model_card,
    write_index_bundle,
)
from realm_hf.index import RealmIndex
from realm_hf.index.storage import came_from_hub
from realm_hf.checkpoints.index_location import load_index_for_model


TINY = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}
MODEL_REPO = "org/realm-tiny"
INDEX_REPO = "org/realm-tiny-index"
COMMIT = "1" * 40
CLS, SEP = 1, 2


# ------------------------------------------------------------------------------------------------- helpers
def tiny_open_qa(seed: int = 0) -> RealmForOpenQA:
    torch.manual_seed(seed)
    config = RealmForOpenQAConfig(
        retriever_config={"bert_config": TINY, "projection_size": 16, "query_max_length": 32, "block_max_length": 64},
        reader_config={"bert_config": TINY, "max_length": 64, "span_hidden_size": 16},
        top_k=3,
    )
    return RealmForOpenQA(config).eval()


def tiny_blocks(num: int = 12) -> datasets.Dataset:
    rng = np.random.default_rng(0)
    rows = {"block_id": [], "title": [], "text": [], "input_ids": [], "token_type_ids": []}
    for i in range(num):
        body = rng.integers(3, 100, size=int(rng.integers(4, 12))).tolist()
        rows["block_id"].append(i)
        rows["title"].append(f"title {i}")
        rows["text"].append(f"block {i} text")
        rows["input_ids"].append([CLS, 5 + i, SEP, *body, SEP])
        rows["token_type_ids"].append([0, 0, 0] + [1] * (len(body) + 1))
    return datasets.Dataset.from_dict(rows)


def tiny_index(model: RealmForOpenQA, index_type: str = "Flat") -> RealmIndex:
    return RealmIndex.build(tiny_blocks(), model.retriever, index_type=index_type, batch_size=8, step=7)


def populate_cache(cache: Path, repo_id: str, folder: Path, repo_type: str = "model", commit: str = COMMIT) -> Path:
    """`markdown_blocks.populate_cache` (the Hugging Face cache layout) with this module's default commit."""
    return markdown_blocks.populate_cache(cache, repo_id, folder, commit, repo_type)


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache in tmp_path, offline (constants are read at import, so patch them too)."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    return cache


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    return install_fake_hub(tmp_path, monkeypatch)


# ------------------------------------------------------------------------------------------ download path
def test_auto_model_from_a_hub_repo_id(tmp_path, hub_cache):
    model = tiny_open_qa()
    model.config.index_repo_id, model.config.index_revision = INDEX_REPO, COMMIT
    model.save_pretrained(tmp_path / "model")
    populate_cache(hub_cache, MODEL_REPO, tmp_path / "model")

    loaded = AutoModel.from_pretrained(MODEL_REPO)  # real transformers + huggingface_hub resolution, offline

    assert isinstance(loaded, RealmForOpenQA)
    assert (loaded.config.index_repo_id, loaded.config.index_revision) == (INDEX_REPO, COMMIT)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor)


def test_index_from_a_hub_repo_id_matches_the_original(tmp_path, hub_cache):
    model = tiny_open_qa()
    index = tiny_index(model)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    written = write_index_bundle(index, bundle)
    assert written == ["blocks/blocks-00000-of-00001.parquet", "embeddings.npy", "index.faiss", "manifest.json"]
    snapshot = populate_cache(hub_cache, INDEX_REPO, bundle, repo_type="dataset")

    for revision in (None, COMMIT):
        loaded = RealmIndex.from_pretrained(INDEX_REPO, revision=revision)
        assert isinstance(loaded.embeddings, np.memmap)
        assert loaded.manifest.fingerprint == index.fingerprint and loaded.step == 7
        assert loaded.blocks["title"] == index.blocks["title"]
        assert loaded.blocks["input_ids"] == index.blocks["input_ids"]
        queries = torch.randn(4, index.dim)
        for got, want in zip(loaded.search(queries, 3), index.search(queries, 3)):
            torch.testing.assert_close(got, want)
    assert str(snapshot).startswith(str(hub_cache / "datasets--org--realm-tiny-index"))
    check_index_matches_model(loaded, model)  # the pairing holds after the round trip


def test_offline_reads_never_ask_the_hub_for_a_pinned_commit(tmp_path, hub_cache, monkeypatch):
    # huggingface_hub 1.x lists a pinned commit's files online even with HF_HUB_OFFLINE=1 (and fails); 2.x asks, then
    # falls back to the cache. Offline, realm_hf reads the cache only, whatever the version.
    index = tiny_index(tiny_open_qa())
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    write_index_bundle(index, bundle)
    populate_cache(hub_cache, INDEX_REPO, bundle, repo_type="dataset")

    def online(*args, **kwargs):
        raise AssertionError("went to the Hub while offline")

    monkeypatch.setattr(HfApi, "list_repo_tree", online)
    monkeypatch.setattr(HfApi, "repo_info", online)
    loaded = RealmIndex.from_pretrained(INDEX_REPO, revision=COMMIT)
    assert loaded.num_blocks == index.num_blocks
    assert cli_main(["download", INDEX_REPO, "--index", "--revision", COMMIT]) == 0


def test_index_bundle_asks_only_for_what_the_index_type_needs():
    model = tiny_open_qa()
    assert "index.faiss" in index_bundle_patterns(tiny_index(model, "Flat").manifest)
    assert index_bundle_patterns(tiny_index(model, "torch-exact").manifest) == [
        "manifest.json", "embeddings.npy", "blocks/*"
    ]


def test_missing_index_file_names_the_repo_and_the_file(tmp_path, hub_cache):
    index = tiny_index(tiny_open_qa())
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    write_index_bundle(index, bundle)
    (bundle / "index.faiss").unlink()
    populate_cache(hub_cache, INDEX_REPO, bundle, repo_type="dataset")

    with pytest.raises(FileNotFoundError, match=r"org/realm-tiny-index.*index\.faiss"):
        RealmIndex.from_pretrained(INDEX_REPO, trust_index_file=True)  # only a loader that reads it needs it
    assert RealmIndex.from_pretrained(INDEX_REPO).num_blocks == index.num_blocks  # rebuilt from the embeddings
    # a repo that is not in the cache at all: the manifest is the first thing that is missing
    missing = r"manifest\.json.*'org/other-index'.*realm-hf download org/other-index"
    with pytest.raises(FileNotFoundError, match=missing):
        RealmIndex.from_pretrained("org/other-index")
    # a path that cannot be a repo id keeps the local-directory error
    with pytest.raises(FileNotFoundError, match="No index directory"):
        RealmIndex.from_pretrained(tmp_path / "nowhere")


def test_download_command_prints_the_cached_snapshot(tmp_path, hub_cache, capsys):
    model = tiny_open_qa()
    model.save_pretrained(tmp_path / "model")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    write_index_bundle(tiny_index(model), bundle)
    model_snapshot = populate_cache(hub_cache, MODEL_REPO, tmp_path / "model")
    index_snapshot = populate_cache(hub_cache, INDEX_REPO, bundle, repo_type="dataset")

    assert cli_main(["download", MODEL_REPO]) == 0
    assert cli_main(["download", INDEX_REPO, "--index"]) == 0
    printed = capsys.readouterr().out.split()
    assert [Path(p).resolve() for p in printed] == [model_snapshot.resolve(), index_snapshot.resolve()]


# ---------------------------------------------------------------------------------------------- trust
def _bundle(tmp_path: Path, index: RealmIndex, name: str = "bundle") -> Path:
    bundle = tmp_path / name
    bundle.mkdir()
    write_index_bundle(index, bundle)
    return bundle


@pytest.fixture
def faiss_reads(monkeypatch) -> list[str]:
    """The paths handed to faiss's native reader."""
    faiss = pytest.importorskip("faiss")
    reads: list[str] = []
    native = faiss.read_index
    monkeypatch.setattr(faiss, "read_index", lambda path, *args: reads.append(path) or native(path, *args))
    return reads


def test_a_faiss_file_from_the_hub_is_parsed_only_when_trusted(tmp_path, hub_cache, faiss_reads):
    index = tiny_index(tiny_open_qa())
    snapshot = populate_cache(hub_cache, INDEX_REPO, _bundle(tmp_path, index), repo_type="dataset")
    queries = torch.randn(3, index.dim)

    rebuilt = RealmIndex.from_pretrained(INDEX_REPO, revision=COMMIT)
    assert faiss_reads == [] and rebuilt.index_type == "Flat"  # rebuilt from embeddings.npy with the factory string
    for got, want in zip(rebuilt.search(queries, 4), index.search(queries, 4)):
        torch.testing.assert_close(got, want)
    RealmIndex.from_pretrained(snapshot)  # a path into the Hugging Face cache is still a download
    assert faiss_reads == []

    RealmIndex.from_pretrained(INDEX_REPO, revision=COMMIT, trust_index_file=True)
    assert faiss_reads == [os.path.join(snapshot, "index.faiss")]
    copy = tmp_path / "my-copy"
    shutil.copytree(snapshot, copy)  # out of the cache (or a git clone): still not written by this user's realm_hf
    RealmIndex.from_pretrained(copy)
    assert faiss_reads[1:] == []
    RealmIndex.from_pretrained(copy, trust_index_file=True).save_pretrained(tmp_path / "mine")  # now it is theirs
    RealmIndex.from_pretrained(tmp_path / "mine")
    assert faiss_reads[1:] == [os.path.join(copy, "index.faiss"), os.path.join(tmp_path, "mine", "index.faiss")]


def test_downloads_into_a_local_dir_count_as_from_the_hub(tmp_path):
    from huggingface_hub._local_folder import get_local_download_paths  # where `hf download --local-dir` records it

    local = tmp_path / "downloaded"
    (local / "index").mkdir(parents=True)
    metadata = get_local_download_paths(local, "index/manifest.json").metadata_path
    metadata.parent.mkdir(parents=True, exist_ok=True)
    metadata.write_text("commit\netag\n0\n")
    assert came_from_hub(local / "index")
    assert not came_from_hub(tmp_path / "mine") and not came_from_hub(local)  # no manifest of its own downloaded


def test_a_hub_bundle_records_the_checksum_of_every_file_and_refuses_a_tampered_one(tmp_path, hub_cache):
    bundle = _bundle(tmp_path, tiny_index(tiny_open_qa()))
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert sorted(manifest["checksums"]) == ["blocks/blocks-00000-of-00001.parquet", "embeddings.npy", "index.faiss"]
    shard = str(bundle / "blocks" / "blocks-00000-of-00001.parquet")
    table = pq.read_table(shard)
    titles = table.column("title").to_pylist()
    titles[3] = "a title the index was not built with"  # the evidence a user is shown
    pq.write_table(table.set_column(table.schema.get_field_index("title"), "title", pa.array(titles)), shard)
    populate_cache(hub_cache, INDEX_REPO, bundle, repo_type="dataset")
    with pytest.raises(ValueError, match=r"blocks-00000-of-00001\.parquet does not match the checksum"):
        RealmIndex.from_pretrained(INDEX_REPO)


def test_the_index_folder_of_a_hub_model_is_read_at_the_revision_the_model_came_from(tmp_path, hub_cache):
    from realm_pipeline_helpers import make_open_qa_dir

    first, second = "a" * 40, "b" * 40
    folder = Path(make_open_qa_dir(str(tmp_path / "first")))
    populate_cache(hub_cache, MODEL_REPO, folder, commit=first)
    later = tmp_path / "second"  # the same model, published again with a smaller index: main moves to it
    shutil.copytree(folder, later, ignore=shutil.ignore_patterns("index"))
    index = RealmIndex.from_pretrained(folder / "index")
    index.remove([0])
    index.save_pretrained(later / "index")
    populate_cache(hub_cache, MODEL_REPO, later, commit=second)

    pinned = transformers_pipeline("realm-open-qa", model=MODEL_REPO, revision=first)
    assert pinned.model.hub_revision == first and pinned.index.num_blocks == 10
    assert transformers_pipeline("realm-open-qa", model=MODEL_REPO).index.num_blocks == 9
    model = AutoModel.from_pretrained(MODEL_REPO, revision=first)
    assert load_index_for_model(MODEL_REPO, model.config, model_revision=model.hub_revision).num_blocks == 10


def test_an_index_repo_is_read_at_the_configs_index_revision(tmp_path, hub_cache, caplog):
    model = tiny_open_qa()
    first, second = "c" * 40, "d" * 40
    for commit, num_blocks in ((first, 12), (second, 9)):
        index = RealmIndex.build(tiny_blocks(num_blocks), model.retriever, index_type="Flat", batch_size=8)
        bundle = _bundle(tmp_path, index, name=f"bundle-{num_blocks}")
        populate_cache(hub_cache, INDEX_REPO, bundle, repo_type="dataset", commit=commit)
    model.config.index_repo_id, model.config.index_revision = INDEX_REPO, first
    assert load_index_for_model(None, model.config).num_blocks == 12
    model.config.index_revision = None
    with caplog.at_level("WARNING", logger="realm_hf.checkpoints.index_location"):
        assert load_index_for_model(None, model.config).num_blocks == 9  # whatever main holds now, with a warning
    assert "pins no index_revision" in caplog.text


# -------------------------------------------------------------------------------------------- upload path
def test_push_index_to_hub_is_one_dataset_commit(tmp_path, hub_cache, fake_hub):
    model = tiny_open_qa()
    index = tiny_index(model)

    info = index.push_to_hub(INDEX_REPO, card_facts={"model_repo_id": MODEL_REPO, "corpus": "synthetic blocks"})

    assert fake_hub.repos == [{"repo_id": INDEX_REPO, "repo_type": "dataset", "private": None, "exist_ok": True}]
    assert len(fake_hub.commits) == 1
    commit = fake_hub.commits[0]
    assert commit["repo_id"] == INDEX_REPO and commit["repo_type"] == "dataset" and commit["revision"] is None
    assert info.oid == commit["oid"]
    assert all(isinstance(op, CommitOperationAdd) for op in commit["operations"])  # nothing stale offline
    assert sorted(added(commit)) == [
        "README.md", "blocks/blocks-00000-of-00001.parquet", "embeddings.npy", "index.faiss", "manifest.json"
    ]
    uploaded = commit["folder"]
    manifest = json.loads((uploaded / "manifest.json").read_text())
    assert (manifest["num_blocks"], manifest["dim"], manifest["index_type"]) == (12, 16, "Flat")
    assert manifest["fingerprint"] == index.fingerprint
    card = DatasetCard((uploaded / "README.md").read_text())
    assert card.data.configs == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "blocks/*.parquet"}]}
    ]
    assert {"realm", "realm_hf", "faiss"} <= set(card.data.tags)
    assert card.data.task_categories == ["text-retrieval"] and card.data.size_categories == ["n<1K"]
    assert MODEL_REPO in card.text and index.fingerprint in card.text and "guu2020realm" in card.text

    # what was uploaded is what a download loads
    populate_cache(hub_cache, INDEX_REPO, uploaded, repo_type="dataset", commit=commit["oid"])
    loaded = RealmIndex.from_pretrained(INDEX_REPO, revision=commit["oid"])
    queries = torch.randn(2, index.dim)
    torch.testing.assert_close(loaded.search(queries, 4)[1], index.search(queries, 4)[1])


def test_push_index_deletes_files_of_the_previous_bundle(tmp_path, hub_cache, fake_hub, monkeypatch):
    earlier = ["README.md", "blocks/blocks-00000-of-00002.parquet", "blocks/blocks-00001-of-00002.parquet",
               "embeddings.npy", "index.faiss", "manifest.json", ".gitattributes"]
    monkeypatch.setattr(HfApi, "list_repo_files", lambda api, repo_id, **kwargs: earlier)
    tiny_index(tiny_open_qa(), "torch-exact").push_to_hub(INDEX_REPO)

    operations = fake_hub.commits[0]["operations"]
    deleted = [op.path_in_repo for op in operations if isinstance(op, CommitOperationDelete)]
    assert deleted == ["blocks/blocks-00000-of-00002.parquet", "blocks/blocks-00001-of-00002.parquet", "index.faiss"]
    assert "index.faiss" not in added(fake_hub.commits[0])
    assert set(deleted).isdisjoint(added(fake_hub.commits[0]))


def test_publish_pushes_the_index_then_the_model_pinned_to_it(tmp_path, hub_cache, fake_hub, capsys):
    run = tmp_path / "run"
    model_dir = run / "final"
    model = tiny_open_qa()
    model.save_pretrained(model_dir)
    index = tiny_index(model)
    index.save_pretrained(model_dir / "index")
    (run / "history.json").write_text(json.dumps([{"step": 5, "loss": 3.0}, {"step": 10, "loss": 2.5}]))
    (run / "training_args.json").write_text(json.dumps({"learning_rate": 1e-5, "max_steps": 10, "top_k": 3}))
    eval_file = tmp_path / "eval.json"
    eval_file.write_text(json.dumps(
        {"dataset": "nq_open", "split": "test", "exact_match": 12.5, "recall@5": 37.5, "count": 8}
    ))
    card_output = tmp_path / "model_cards" / "realm-tiny.md"

    assert cli_main([
        "publish", "--model-dir", str(model_dir), "--repo-id", MODEL_REPO, "--eval-results", str(eval_file),
        "--base-model", "org/realm-pretrained", "--card-output", str(card_output),
    ]) == 0

    index_commit, model_commit = fake_hub.commits
    assert (index_commit["repo_id"], index_commit["repo_type"]) == (INDEX_REPO, "dataset")
    assert (model_commit["repo_id"], model_commit["repo_type"]) == (MODEL_REPO, "model")
    assert [repo["repo_type"] for repo in fake_hub.repos] == ["dataset", "model"]
    assert sorted(added(model_commit)) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads((model_commit["folder"] / "config.json").read_text())
    assert config["index_repo_id"] == INDEX_REPO and config["index_revision"] == index_commit["oid"]
    card = ModelCard((model_commit["folder"] / "README.md").read_text())
    assert card.data.base_model == "org/realm-pretrained" and card.data.pipeline_tag == "question-answering"
    metrics = {(r.metric_name, r.metric_value) for r in card.data.eval_results}
    assert metrics == {("Exact Match", 12.5), ("Recall@5", 37.5)}
    assert "| Optimizer steps | 10 |" in card.text and "| Learning rate | 1e-05 |" in card.text
    assert card_output.read_text() == (model_commit["folder"] / "README.md").read_text()
    out = capsys.readouterr().out
    assert f"Index: {INDEX_REPO} @ {index_commit['oid']}" in out

    # the published pair loads back from the Hub cache and passes the pairing check
    populate_cache(hub_cache, MODEL_REPO, model_commit["folder"], commit=model_commit["oid"])
    populate_cache(hub_cache, INDEX_REPO, index_commit["folder"], repo_type="dataset", commit=index_commit["oid"])
    loaded = AutoModel.from_pretrained(MODEL_REPO)
    loaded_index = RealmIndex.from_pretrained(loaded.config.index_repo_id, revision=loaded.config.index_revision)
    check_index_matches_model(loaded_index, loaded)


def test_publish_a_pretraining_run_loads_back_by_subfolder(tmp_path, hub_cache, fake_hub):
    final = tmp_path / "final"  # the layout RealmPretrainer.save_model writes: retriever/ encoder/ (index/)
    retriever = tiny_open_qa().retriever
    encoder = realm_hf.RealmKnowledgeEncoder(
        realm_hf.RealmKnowledgeEncoderConfig(bert_config=TINY, num_candidates=3, max_length=64, mask_token_id=4)
    )
    retriever.save_pretrained(final / "retriever")
    encoder.save_pretrained(final / "encoder")

    result = realm_hf.hub.publish(final, "org/realm-pre-tiny", card_facts={"corpus": "tiny corpus"})

    assert result.kind == "pretrained" and result.index_repo_id is None
    (commit,) = fake_hub.commits
    assert sorted(added(commit)) == [
        "README.md", "encoder/config.json", "encoder/model.safetensors", "retriever/config.json",
        "retriever/model.safetensors",
    ]
    # no training files next to it: the card names Z as told, and says nothing of X
    assert "- **Z, the knowledge corpus** (the blocks retrieved; the index): tiny corpus.\n" in result.card
    assert "X ≠ Z" not in result.card and "X = Z" not in result.card and "realm-hf pretrain" not in result.card
    populate_cache(hub_cache, "org/realm-pre-tiny", commit["folder"], commit=commit["oid"])
    loaded = AutoModel.from_pretrained("org/realm-pre-tiny", subfolder="retriever")
    assert isinstance(loaded, realm_hf.RealmRetriever)
    torch.testing.assert_close(loaded.state_dict(), retriever.state_dict())
    assert isinstance(AutoModel.from_pretrained("org/realm-pre-tiny", subfolder="encoder"), realm_hf.RealmKnowledgeEncoder)


def test_publish_refuses_an_index_of_another_model(tmp_path, fake_hub, capsys):
    model_dir = tmp_path / "final"
    tiny_open_qa(seed=0).save_pretrained(model_dir)
    tiny_index(tiny_open_qa(seed=1)).save_pretrained(model_dir / "index")
    capsys.readouterr()  # what saving the fixtures printed
    assert cli_main(["publish", "--model-dir", str(model_dir), "--repo-id", MODEL_REPO]) == 2
    stderr = capsys.readouterr().err
    # one line that says why (the fingerprint) and how to fix it (the rebuild command), no traceback
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("realm-hf publish: error: "), stderr
    assert "fingerprint" in errors[0] and "realm-hf build-index" in errors[0] and "Traceback" not in stderr
    assert fake_hub.commits == []


# --------------------------------------------------------------------------------------- model <-> index
def test_mismatched_index_is_refused_with_the_rebuild_command():
    model, other = tiny_open_qa(seed=0), tiny_open_qa(seed=1)
    index = tiny_index(other)
    rebuild = r"document-tower fingerprint.*realm-hf build-index --corpus <corpus> --model org/x"
    with pytest.raises(ValueError, match=rebuild):
        check_index_matches_model(index, model, model_name="org/x")

    wide = RealmIndex.from_embeddings(tiny_blocks(), np.random.rand(12, 24).astype(np.float32), fingerprint=None)
    with pytest.raises(ValueError, match="embedding dim: index has 24, the model's retriever produces 16"):
        check_index_matches_model(wide, model)


def test_recorded_index_fingerprint_keeps_a_fine_tuned_model_paired(tmp_path):
    model = tiny_open_qa()
    index = tiny_index(model)
    record_index_pairing(model, index, repo_id=INDEX_REPO, revision=COMMIT)
    with torch.no_grad():  # fine-tuning moves the shared query/document tower
        for parameter in model.retriever.query_embedder.parameters():
            parameter.add_(0.01)
    check_index_matches_model(index, model)  # paired through config.index_fingerprint
    model.save_pretrained(tmp_path / "tuned")
    reloaded = AutoModel.from_pretrained(tmp_path / "tuned")
    assert reloaded.config.index_fingerprint == index.fingerprint
    check_index_matches_model(index, reloaded)

    del model.config.index_fingerprint  # without the record, the moved tower no longer matches
    with pytest.raises(ValueError, match="fingerprint"):
        check_index_matches_model(index, model)
    with pytest.raises(ValueError, match="not by this model's document tower"):
        record_index_pairing(model, index)


# ---------------------------------------------------------------------------------------------- model cards
def test_model_card_reads_metrics_from_the_evaluation_output(tmp_path):
    eval_file = tmp_path / "nq-test.json"
    eval_file.write_text(json.dumps([
        {"dataset": "nq_open", "split": "test", "exact_match": 40.4444, "recall@5": 61.2, "count": 3610},
        {"dataset": "web_questions", "split": "test", "exact_match": 40.7, "count": 2032},
    ]))
    card = render_model_card(
        "open_qa", eval_results=eval_file, model_id=MODEL_REPO, index_repo_id=INDEX_REPO, index_revision=COMMIT
    )
    parsed = ModelCard(str(card))  # the metadata survives the YAML round trip
    results = {(r.dataset_name, r.metric_type, r.metric_value) for r in parsed.data.eval_results}
    assert results == {
        ("Natural Questions (open)", "exact_match", 40.44),
        ("Natural Questions (open)", "recall", 61.2),
        ("WebQuestions", "exact_match", 40.7),
    }
    assert parsed.data.model_name == MODEL_REPO and parsed.data.datasets == ["nq_open", "web_questions"]
    assert "| Natural Questions (open) | test | 3610 | 40.44 | recall@5: 61.2 |" in parsed.text
    assert "`nq-test.json`" in parsed.text and "Thatcher" in parsed.text and "guu2020realm" in parsed.text
    assert f'revision="{COMMIT}"' not in parsed.text and INDEX_REPO in parsed.text

    # the metrics file of realm_hf.evaluation names the QA file instead of the dataset
    (from_evaluation,) = load_eval_results({"model": "m", "qa_file": "/data/nq-test.jsonl", "exact_match": 1.0,
                                            "count": 4, "recall@5": 50.0, "recall@1": 25.0, "answerable": 50.0})
    assert from_evaluation["dataset"] == "nq-test"
    assert from_evaluation["metrics"] == {"exact_match": 1.0, "recall@1": 25.0, "recall@5": 50.0}
    assert from_evaluation["split"] is None
    # a held-out row slice of the file is the split
    (sliced,) = load_eval_results({"qa_file": "/data/nq-dev.jsonl[:1000]", "exact_match": 0.7, "count": 1000})
    assert sliced["dataset"] == "nq-dev" and sliced["split"] == "rows 0-999"

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "nq_open", "count": 3}))
    with pytest.raises(ValueError, match=r"bad\.json.*no metric"):
        load_eval_results(bad)


def test_pretrained_card_reads_training_details_from_the_trainer_files(tmp_path):
    final = tmp_path / "run" / "final"
    final.mkdir(parents=True)
    (final.parent / "history.json").write_text(json.dumps([
        {"step": 500, "loss": 4.0, "refresh/swap_step": 500, "refresh/staleness_steps": 20},
        {"step": 1000, "loss": 3.5, "refresh/swap_step": 1000, "refresh/staleness_steps": 30,
         "eval/zero_shot_recall@5": 25.5},
    ]))
    (final.parent / "training_args.json").write_text(json.dumps(
        {"corpus": "cc-news", "masking": "salient_span", "refresh_schedule": "500", "num_candidates": 8,
         "use_null_document": True, "max_steps": 1000}
    ))
    (final.parent / "trainer_state.json").write_text(json.dumps(
        {"step": 1000, "command": ["realm-hf", "pretrain", "--output_dir", "runs/cc news", "--corpus", "cc-news"]}
    ))
    card = render_model_card("pretrained", training_dir=final, model_id="org/realm-cc-news", model_layout="pretrained")
    text = str(card)
    for row in ("- **X = Z**: `cc-news`.", "| Masking | salient_span |", "| Optimizer steps | 1000 |",
                "| Index refresh schedule (steps) | 500 |", "| Mean index staleness (steps) | 25.0 |",
                "| Index refreshes swapped in | 2 |", 'subfolder="retriever"',
                "At step 1000:",
                "| `zero_shot_recall@5` | zero-shot Recall@5 of the eval_qa_file questions (%) | 25.5 |",
                "```bash\nrealm-hf pretrain \\\n    --output_dir 'runs/cc news' \\\n    --corpus cc-news\n```"):
        assert row in text
    assert ModelCard(text).data.pipeline_tag == "fill-mask"
    # a name for X is refused for a run that had none (X = Z), in one line that says what to do
    with pytest.raises(ValueError, match=r"^pretraining_corpus='CC-News' names a pre-training corpus X, but this run "
                                         r"masked the sentences of its knowledge corpus \(X = Z[^\n]*--corpus\)\.$"):
        render_model_card("pretrained", training_dir=final, model_layout="pretrained", pretraining_corpus="CC-News")


# ------------------------------------------------------------------------------------------ trust_remote_code
@pytest.mark.slow
def test_remote_code_loads_without_importing_realm_hf(tmp_path):
    model = tiny_open_qa()
    model.save_pretrained(tmp_path / "model")
    add_remote_code(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "realm_hf_remote.RealmForOpenQA"
    script = textwrap.dedent(f"""
        import sys
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path / "model")!r}, trust_remote_code=True)
        assert type(model).__name__ == "RealmForOpenQA", type(model)
        assert "realm_hf" in sys.modules  # imported by the repo's module, not by us
        model.save_pretrained({str(tmp_path / "resaved")!r})
        print("ok", sorted(model.config.auto_map.items()))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("ok")  # (accelerate may log to stdout first)
    # saving again keeps the shim (not copies of realm_hf's modules)
    resaved = json.loads((tmp_path / "resaved" / "config.json").read_text())
    assert resaved["auto_map"]["AutoModel"] == "realm_hf_remote.RealmForOpenQA"
    assert sorted(p.name for p in (tmp_path / "resaved").glob("*.py")) == ["realm_hf_remote.py"]
    # without trust_remote_code the registered classes are used as before
    assert isinstance(AutoModel.from_pretrained(tmp_path / "model"), RealmForOpenQA)
    assert isinstance(AutoConfig.from_pretrained(tmp_path / "model"), realm_hf.RealmForOpenQAConfig)
