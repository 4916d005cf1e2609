"""`import realm_hf` is cheap (transformers' lazy top level, no torch), and the transformers registrations happen in
either import order: at `import realm_hf` for what transformers has loaded, when transformers loads the rest later, on
first use of a realm_hf name, or through `realm_hf.register_auto_classes()`.

Each check runs in a fresh interpreter: the import state of the test process says nothing about a user's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


HEAVY = (
    "torch",
    "datasets",
    "faiss",
    "pyarrow",
    "accelerate",
    # transformers' top level is lazy and imported (realm_hf watches it); what it loads on demand is heavy
    "transformers.modeling_utils",
    "transformers.models.auto.configuration_auto",
    "transformers.pipelines",
)


def run_python(code: str, cwd: str | None = None) -> str:
    """stdout of `code` in a fresh interpreter (offline), failing the test with its stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "could not register" not in done.stderr, done.stderr[-3000:]  # registration met a half-made module
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
    "first",
    [
        "import transformers.models.auto.modeling_auto; import realm_hf",  # registration at import
        "from transformers import AutoConfig, AutoModel; import realm_hf",
        "from transformers import pipeline; import realm_hf",
        "import realm_hf",  # realm_hf first (isort's order): transformers' imports below register
        "import realm_hf; realm_hf.register_auto_classes()",
        "import realm_hf; from transformers import pipeline; from realm_hf import RealmIndex",  # a name taken
        "from realm_hf import RealmForOpenQA; from transformers import pipeline; from realm_hf.pipelines import OPEN_QA_TASK",
        "import realm_hf.corpus; from transformers import pipeline; from realm_hf.pipelines import OPEN_QA_TASK",
    ],
)
def test_auto_classes_and_pipelines_registered(model_dir, first):
    out = run_python(
        f"""
        {first}
        from transformers import AutoConfig, AutoModel
        from transformers.pipelines import PIPELINE_REGISTRY
        print(type(AutoConfig.from_pretrained({model_dir!r})).__name__, type(AutoModel.from_pretrained({model_dir!r})).__name__)
        print("open-domain-question-answering" in PIPELINE_REGISTRY.get_supported_tasks())
        """
    )
    assert out.split("\n")[:2] == ["RealmRetrieverConfig RealmRetriever", "True"]


@pytest.fixture(scope="module")
def realm_dirs(tmp_path_factory) -> dict[str, str]:
    """A tiny RealmForOpenQA directory with its index and a tiny pre-training output (tests/realm_pipeline_helpers)."""
    from realm_pipeline_helpers import make_open_qa_dir, make_pretraining_dir

    root = tmp_path_factory.mktemp("import_order")
    return {
        "open_qa": make_open_qa_dir(str(root / "open_qa")),
        "pretraining": make_pretraining_dir(str(root / "pretraining")),
    }


@pytest.mark.parametrize(
    "imports",
    [
        # isort / ruff order: realm_hf before transformers
        "import realm_hf\nfrom transformers import AutoConfig, AutoModel, pipeline",
        "from transformers import AutoConfig, AutoModel, pipeline\nimport realm_hf",
        # submodules of transformers, not its top level
        "import realm_hf\nfrom transformers.models.auto import AutoConfig, AutoModel\nfrom transformers.pipelines import pipeline",
        "import realm_hf\nimport transformers\nAutoConfig, AutoModel, pipeline = transformers.AutoConfig, transformers.AutoModel, transformers.pipeline",
    ],
    ids=["realm_hf-first", "transformers-first", "submodules", "attributes"],
)
def test_either_import_order_gives_the_auto_classes_and_both_tasks(realm_dirs, imports):
    """The issue's lines, each in a fresh interpreter: both pipeline tasks from a directory, `AutoModel` and
    `AutoConfig.for_model`, whatever was imported first; and transformers' modules get their own class back."""
    out = run_python(
        imports
        + f"""
import sys
qa = pipeline("realm-open-qa", model={realm_dirs["open_qa"]!r})
print(type(qa).__name__, sorted(qa("who wrote the origin of species"))[:2])
fill = pipeline("realm-fill-mask", model={realm_dirs["pretraining"]!r})
print(type(fill).__name__, len(fill("The origin of species was written by [MASK].", top_k=2)))
print(type(AutoModel.from_pretrained({realm_dirs["open_qa"]!r})).__name__, type(AutoConfig.for_model("realm_open_qa")).__name__)
print(type(sys.modules["transformers"]).__module__)
"""
    )
    assert out.split("\n")[:4] == [
        "OpenDomainQuestionAnsweringPipeline ['answer', 'block_id']",
        "RealmFillMaskPipeline 2",
        "RealmForOpenQA RealmForOpenQAConfig",
        "transformers.utils.import_utils",
    ]


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
    """No finder nor path hook of realm_hf's: what `import realm_hf` adds to `sys.meta_path` is transformers' own
    (its lazy top level appends one), the same as `import transformers` alone."""
    out = run_python(
        """
        import sys
        before, hooks = list(sys.meta_path), list(sys.path_hooks)
        import realm_hf, realm_hf.cli
        added = [type(finder).__module__ for finder in sys.meta_path if finder not in before]
        print(added, sys.path_hooks == hooks)
        """
    )
    assert out.split("\n")[0] == "['transformers.utils.import_utils'] True"


@pytest.mark.parametrize(
    "code",
    [
        # a realm_hf module that imports transformers' models while realm_hf's own models are half-made
        "from realm_hf.modeling.knowledge_encoder import RealmKnowledgeEncoder",
        "import realm_hf.training.loop",
        "from realm_hf.retrieval import load_retriever",
    ],
)
def test_registration_waits_for_half_made_modules(model_dir, code):
    """Registering while realm_hf's models (or transformers' modules) are still being imported met them half-made
    ("realm_hf could not register its models ... partially initialized module"); it waits for them instead."""
    out = run_python(
        f"""
        {code}
        from transformers import AutoConfig, AutoTokenizer
        print(type(AutoConfig.from_pretrained({model_dir!r})).__name__)
        """
    )
    assert out.split("\n")[0] == "RealmRetrieverConfig"
