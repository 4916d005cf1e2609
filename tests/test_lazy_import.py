"""`import realm_hf` is cheap, and the transformers registrations happen explicitly: at `import realm_hf` for what
transformers has loaded, on first use of a realm_hf name, or through `realm_hf.register_auto_classes()`.

Each check runs in a fresh interpreter: the import state of the test process says nothing about a user's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


HEAVY = ("torch", "transformers", "datasets", "faiss", "pyarrow", "accelerate")


def run_python(code: str, cwd: str | None = None) -> str:
    """stdout of `code` in a fresh interpreter (offline), failing the test with its stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_import_realm_hf_imports_nothing_heavy():
    out = run_python(
        f"""
        import sys
        import realm_hf, realm_hf.index, realm_hf.corpus, realm_hf.modeling, realm_hf.pipelines, realm_hf.training
        print(sorted(name for name in {HEAVY!r} if name in sys.modules))
        print("RealmRetriever" in dir(realm_hf), "RealmIndex" in realm_hf.index.__all__)
        """
    )
    assert out.split("\n")[:2] == ["[]", "True True"]


def test_cli_help_imports_nothing_heavy():
    out = run_python(
        f"""
        import contextlib, io, sys
        from realm_hf.cli import main
        sys.argv = ["realm-hf", "--help"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main()
        print(sorted(name for name in {HEAVY!r} if name in sys.modules))
        """
    )
    assert out.strip() == "[]"


def test_lazy_names_resolve():
    out = run_python(
        """
        import realm_hf
        from realm_hf import RealmRetriever
        from realm_hf.index import RealmIndex
        from realm_hf.modeling.retriever import RealmRetriever as direct
        import realm_hf.index
        print(RealmRetriever is direct, realm_hf.index.mips.RealmIndex is RealmIndex)
        try:
            realm_hf.NoSuchThing
        except AttributeError as error:
            print(error)
        """
    )
    assert out.split("\n")[:2] == ["True True", "module 'realm_hf' has no attribute 'NoSuchThing'"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    """A tiny saved RealmRetriever (written by a subprocess, so that this process's imports stay untouched)."""
    directory = str(tmp_path_factory.mktemp("lazy") / "retriever")
    run_python(
        f"""
        from realm_hf import RealmRetriever, RealmRetrieverConfig
        bert = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=64)
        config = RealmRetrieverConfig(bert_config=bert, projection_size=8, query_max_length=32, block_max_length=64)
        RealmRetriever(config).save_pretrained({directory!r})
        """
    )
    return directory


@pytest.mark.parametrize(
    "first, tasks",
    [
        ("import transformers.models.auto.modeling_auto; import realm_hf", False),  # registration at import
        ("from transformers import AutoConfig, AutoModel; import realm_hf", False),
        ("from transformers import pipeline; import realm_hf", True),
        ("import realm_hf; realm_hf.register_auto_classes()", True),  # realm_hf first: explicit registration
        ("import realm_hf; from transformers import pipeline; from realm_hf import RealmIndex", True),  # a name taken
        # realm_hf imported first, then transformers' pipelines, then a name of realm_hf.pipelines (the task's)
        ("from realm_hf import RealmForOpenQA; from transformers import pipeline; "
         "from realm_hf.pipelines import OPEN_QA_TASK", True),
        # realm_hf imported first without a model name, then the pipelines: the task's registration must make
        # AutoConfig know the model types too, or pipeline(OPEN_QA_TASK, model=<directory>) cannot load a model
        ("import realm_hf.corpus; from transformers import pipeline; from realm_hf.pipelines import OPEN_QA_TASK", True),
    ],
)
def test_auto_classes_and_pipelines_registered(model_dir, first, tasks):
    out = run_python(
        f"""
        {first}
        from transformers import AutoConfig, AutoModel
        from transformers.pipelines import PIPELINE_REGISTRY
        print(type(AutoConfig.from_pretrained({model_dir!r})).__name__, type(AutoModel.from_pretrained({model_dir!r})).__name__)
        print("open-domain-question-answering" in PIPELINE_REGISTRY.get_supported_tasks())
        """
    )
    assert out.split("\n")[:2] == ["RealmRetrieverConfig RealmRetriever", str(tasks)]


def test_a_model_name_registers_the_auto_classes(model_dir):
    out = run_python(
        f"""
        from realm_hf import RealmRetriever
        from transformers import AutoModel
        print(type(AutoModel.from_pretrained({model_dir!r})).__name__)
        """
    )
    assert out.split("\n")[0] == "RealmRetriever"


def test_no_import_hook_is_installed():
    out = run_python(
        """
        import sys
        before = list(sys.meta_path)
        import realm_hf, realm_hf.cli
        print(sys.meta_path == before)
        """
    )
    assert out.split("\n")[0] == "True"
