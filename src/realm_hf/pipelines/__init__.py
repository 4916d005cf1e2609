"""transformers pipelines for REALM: open-domain question answering and retrieval-augmented fill-mask.

Once [`register_pipelines`] has run (`realm_hf` calls it as soon as `transformers.pipelines` is loaded, in either
import order: see `realm_hf`),

- `transformers.pipeline("realm-open-qa", model=<RealmForOpenQA dir or instance>)` (also registered under its long
  name `"open-domain-question-answering"`),
- `transformers.pipeline("realm-fill-mask", model=<pre-training output dir>)` (or its `encoder/`) and
- `transformers.pipeline("fill-mask", model=<pre-training output dir>)` (transformers' own pipeline over
  [`RealmRetrievalAugmentedMaskedLM`], registered with `AutoModelForMaskedLM`)

work like the built-in tasks. Registration uses `transformers.pipelines.PIPELINE_REGISTRY.register_pipeline` (the
public hook for custom tasks) and its task aliases. transformers v5 removed `"question-answering"` and rejects it
before any registry is consulted; its error then names `pipeline("realm-open-qa", ...)`.

The other names below are imported from their submodules on first access.
"""

from __future__ import annotations

import sys

from ..utils.lazy import lazy_exports


_lazy_getattr, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "fill_mask": ["FILL_MASK_TASK", "RealmFillMaskPipeline", "beam_search", "score_candidates"],
        # found in realm_hf.checkpoints (a key with a dot is relative to realm_hf), named here too as before that room
        ".checkpoints.index_location": ["load_index_for_model", "resolve_model_dir"],
        ".checkpoints.parts": ["encoder_subfolder"],
        "masked_lm": ["RealmPretrainingEncoder", "RealmRetrievalAugmentedMaskedLM"],
        "open_qa": [
            "OPEN_QA_TASK",
            "OPEN_QA_TASK_ALIAS",
            "OpenDomainQuestionAnsweringPipeline",
            "add_question_answering_hint",
        ],
    },
    cache=False,  # every access registers the tasks if transformers' pipelines were loaded since (as `realm_hf`)
)
__all__ += ["register_pipelines"]


_tasks_registered = False


def __getattr__(name: str) -> object:
    global _tasks_registered
    if not _tasks_registered and "transformers.pipelines" in sys.modules:
        # e.g. `pipeline(OPEN_QA_TASK, ...)` right after `from transformers import pipeline`
        register_pipelines()
        _tasks_registered = True
    return _lazy_getattr(name)


def register_pipelines() -> None:
    """Register the REALM tasks with transformers (idempotent: a task already bound to our class is left alone), the
    short task name `"realm-open-qa"`, the REALM configs and models with `AutoConfig` / `AutoModel` (a task loads a
    model directory by its `model_type`) and the retrieval-augmented masked LM with `AutoModelForMaskedLM`."""
    from transformers import AutoModelForMaskedLM
    from transformers.pipelines import PIPELINE_REGISTRY

    from ..configuration import RealmKnowledgeEncoderConfig
    from ..modeling import RealmForOpenQA
    from ..modeling.auto import register_models
    from .fill_mask import FILL_MASK_TASK, RealmFillMaskPipeline
    from .masked_lm import RealmPretrainingEncoder, RealmRetrievalAugmentedMaskedLM
    from .open_qa import OPEN_QA_TASK, OPEN_QA_TASK_ALIAS, OpenDomainQuestionAnsweringPipeline, add_question_answering_hint

    register_models()  # a task loads a model directory by its model_type: AutoConfig must know it
    for task, pipeline_class, model_class in (
        (OPEN_QA_TASK, OpenDomainQuestionAnsweringPipeline, RealmForOpenQA),
        (FILL_MASK_TASK, RealmFillMaskPipeline, RealmPretrainingEncoder),
    ):
        current = PIPELINE_REGISTRY.supported_tasks.get(task)
        if current is not None and current.get("impl") is pipeline_class:
            continue
        PIPELINE_REGISTRY.register_pipeline(task, pipeline_class=pipeline_class, pt_model=model_class, type="text")
    PIPELINE_REGISTRY.task_aliases[OPEN_QA_TASK_ALIAS] = OPEN_QA_TASK
    AutoModelForMaskedLM.register(RealmKnowledgeEncoderConfig, RealmRetrievalAugmentedMaskedLM, exist_ok=True)
    add_question_answering_hint()
