"""`realm-hf publish --dry-run` of a folder `realm-hf convert` made: the card names the source checkpoint (linked on
the Hub, `base_model:` in its metadata), its license, what was converted, the answer rule of an Open-QA model, and
credits Google Research and the REALM paper; `conversion.json` is among the files pushed.

The conversion records are written by hand (the contract of `conversion.json`), into folders converted from the tiny
transformers-4.57 checkpoints of tests/fixtures/old_realm. One publish runs as a user types it (a fresh `realm-hf`
process, offline), the others through `realm_hf.cli.main` in this process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import realm_hf_command
from huggingface_hub import ModelCard

from realm_hf.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "old_realm"

EMBEDDER_RECORD = {
    "format": 1, "source": "google/realm-cc-news-pretrained-embedder", "source_path": "/data/realm-cc-news-pretrained-embedder",
    "old_class": "RealmEmbedder", "kind": "embedder", "license": "apache-2.0",
    "converted": ["weights", "tokenizer (as BertTokenizer)"], "realm_hf_version": "0.1.0.dev0",
}


def _converted(directory: Path, kind: str, record: dict | None) -> Path:
    """`realm-hf convert` of the `kind` fixture into `directory/kind`, with `record` as its conversion.json."""
    output = directory / kind
    assert main(["convert", "--src", str(FIXTURES / kind), "--output", str(output)]) == 0
    if record is not None:
        (output / "conversion.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return output


def _publish(model_dir: Path, card: Path, *extra: str) -> int:
    return main(["publish", "--model-dir", str(model_dir), "--repo-id", "org/realm-cc-news", "--dry-run",
                 "--card-output", str(card), *extra])


@pytest.fixture(scope="module")
def embedder(tmp_path_factory) -> Path:
    return _converted(tmp_path_factory.mktemp("converted"), "embedder", EMBEDDER_RECORD)


def test_the_card_names_the_source_its_license_and_what_was_converted(embedder, tmp_path):
    card_file = tmp_path / "card.md"
    done = realm_hf_command("publish", "--model-dir", str(embedder), "--repo-id", "org/realm-cc-news", "--dry-run",
                            "--card-output", str(card_file))
    assert done.returncode == 0, done.stderr[-2000:]
    pushed = done.stdout.splitlines()[0]
    assert pushed.startswith("Dry run: would push ") and "conversion.json" in pushed.split(": ", 1)[1].split(", "), pushed
    card = ModelCard.load(card_file)
    assert card.data.base_model == "google/realm-cc-news-pretrained-embedder"
    assert card.data.license == "apache-2.0"
    text = card.text
    link = "[`google/realm-cc-news-pretrained-embedder`](https://huggingface.co/google/realm-cc-news-pretrained-embedder)"
    assert link in text
    section = text.split("## Converted from transformers' REALM", 1)[1].split("\n## ", 1)[0]
    assert "`RealmEmbedder`" in section and "`RealmRetriever`" in section
    assert "- weights\n- tokenizer (as BertTokenizer)\n" in section
    assert "Google Research" in section and "apache-2.0 license, which this conversion keeps" in section
    assert "Answer rule" not in section  # an embedder answers nothing
    citation = text.split("## Citation", 1)[1]
    assert "Google Research's REALM checkpoint `google/realm-cc-news-pretrained-embedder`" in citation
    assert "Guu, Kelvin" in citation and "REALM" in citation
    assert "No training log was found" not in text and "Not trained by realm_hf" in text


def test_the_license_option_wins_over_the_source_license(embedder, tmp_path):
    card_file = tmp_path / "card.md"
    assert _publish(embedder, card_file, "--license", "mit") == 0
    card = ModelCard.load(card_file)
    assert card.data.license == "mit"
    assert "under the\napache-2.0 license;" in card.text  # the source's license is still named, not claimed kept


def test_a_local_source_is_named_without_a_link_nor_base_model(tmp_path):
    record = {**EMBEDDER_RECORD, "source": None, "license": None, "source_path": "/data/my-old-embedder"}
    folder = _converted(tmp_path, "embedder", record)
    card_file = tmp_path / "card.md"
    assert _publish(folder, card_file) == 0
    card = ModelCard.load(card_file)
    assert card.data.base_model is None and card.data.license is None
    assert "`my-old-embedder` (a local folder, no Hub id)" in card.text and "/data/" not in card.text
    assert "huggingface.co/google" not in card.text and "Google Research's" not in card.text


def test_a_conversion_record_of_another_format_is_refused_in_one_line(tmp_path, capsys):
    folder = _converted(tmp_path, "embedder", {**EMBEDDER_RECORD, "format": 2})
    assert _publish(folder, tmp_path / "card.md") == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "conversion.json: expected a conversion record of format 1, got 2" in error


def test_the_card_of_a_converted_open_qa_model_names_its_answer_rule(tmp_path, capsys):
    folder = _converted(tmp_path, "openqa", None)
    written = folder / "conversion.json"
    if not written.is_file():
        pytest.skip("realm-hf convert writes no conversion.json for an Open-QA checkpoint yet")
    record = {**json.loads(written.read_text()), "source": "google/realm-orqa-nq-openqa", "license": "apache-2.0"}
    assert record["answer_rule"] == "best_span" and record["kind"] == "openqa"
    written.write_text(json.dumps(record), encoding="utf-8")
    card_file = tmp_path / "card.md"
    capsys.readouterr()
    assert _publish(folder, card_file) == 0
    printed = capsys.readouterr().out
    assert "conversion.json" in printed.splitlines()[0] and "would push the index" in printed
    card = ModelCard.load(card_file)
    assert card.data.base_model == "google/realm-orqa-nq-openqa" and card.data.license == "apache-2.0"
    assert card.data.pipeline_tag == "question-answering"
    section = card.text.split("## Converted from transformers' REALM", 1)[1].split("\n## ", 1)[0]
    assert '`config.answer_rule = "best_span"`' in section
    assert "as transformers' `RealmForOpenQA` did" in section and "retrieval score + span score" in section
    assert any(line.startswith("- block records -> index/blocks") for line in section.splitlines())
    assert "fine-tuned for **open-domain question answering**, converted from [`google/realm-orqa-nq-openqa`]" in card.text


def test_hub_and_convert_name_the_same_record_file():
    import realm_hf.convert
    import realm_hf.hub

    assert realm_hf.hub.CONVERSION_FILE == realm_hf.convert.CONVERSION_FILE == "conversion.json"
