"""`realm-hf publish --dry-run` as a user types it (a fresh `realm-hf` process), on each kind of output the package
writes: a REALM pre-training `final/`, an ICT `final/` and an Open-QA fine-tuning `final/`; and the Python
`realm_hf.hub.publish(...)` of docs/hub.md, in a fresh interpreter without `register_auto_classes()`."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from cli_helpers import ENV, realm_hf_command


@pytest.mark.parametrize(
    "output, staged",
    [
        ("pretrain_output", ["retriever/config.json", "encoder/config.json", "config.json"]),
        ("ict_output", ["config.json", "model.safetensors"]),
        ("finetune_output", ["config.json", "model.safetensors"]),
    ],
)
def test_publish_dry_run_from_the_command_line(output, staged, request, tmp_path):
    final = request.getfixturevalue(output)
    card = tmp_path / "README.md"
    done = realm_hf_command(
        "publish", "--dry-run", "--model-dir", str(final), "--repo-id", "org/realm-tiny", "--card-output", str(card)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first = done.stdout.splitlines()[0]
    assert first.startswith("Dry run: would push ") and "org/realm-tiny" in first
    assert all(name in first for name in staged), first
    assert "does not recognize this architecture" not in done.stderr
    assert card.read_text().startswith("---")  # the card was rendered


def test_publish_from_python_without_registering_first(ict_output, finetune_output):
    """docs/hub.md's `from realm_hf.hub import publish; publish(..., dry_run=True)`, nothing imported before."""
    code = textwrap.dedent(
        f"""
        from realm_hf.hub import publish
        for directory in ({str(ict_output)!r}, {str(finetune_output)!r}):
            result = publish(directory, "org/realm-tiny", dry_run=True)
            print(result.kind, "config.json" in result.model_files)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["retriever True", "open_qa True"]
