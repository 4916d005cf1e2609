"""BM25 must not wake JAX: bm25s imports `jax` when it can and runs a top-k on JAX's default device, and JAX then
takes 75 % of a GPU's memory (a BM25 evaluation beside two fine-tunings died of CUDA out-of-memory that way). Here a
stand-in `jax` package that records its import is installed; the BM25 path must work without ever importing it, and
a JAX the user imported first is left as it is."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("bm25s")

SEARCH = textwrap.dedent(
    """
    import sys
    {before}
    from realm_hf.index.bm25 import Bm25Retriever
    bm25 = Bm25Retriever([{{"block_id": 7, "title": "Nile", "text": "The Nile is a river in Africa."}},
                          {{"block_id": 9, "title": "Rhine", "text": "The Rhine flows through Germany."}}])
    print(bm25.search_text(["which river is in africa"], k=1).tolist(), "jax" in sys.modules)
    """
)


def run_search(tmp_path, before: str = "") -> subprocess.CompletedProcess:
    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text(
        f"open({str(tmp_path / 'jax-imported')!r}, 'w').close()\n"
        "raise RuntimeError('the stand-in jax was imported')\n" if not before else
        f"open({str(tmp_path / 'jax-imported')!r}, 'w').close()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}
    return subprocess.run([sys.executable, "-c", SEARCH.format(before=before)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_bm25_search_never_imports_jax(tmp_path):
    result = run_search(tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[[7]]", "False"]
    assert not (tmp_path / "jax-imported").exists()


def test_a_jax_imported_by_the_user_is_left_alone(tmp_path):
    result = run_search(tmp_path, before="import jax")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[[7]]", "True"]
