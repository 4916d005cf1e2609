"""transformers pipelines for REALM: open-domain question answering and retrieval-augmented fill-mask.

Once [`register_pipelines`] has run (`realm_hf` calls it as soon as `transformers.pipelines` is loaded, in either
import order: see `realm_hf`),

- `transformers.pipeline("open-domain-question-answering", model=<RealmForOpenQA dir or instance>)` and
- `transformers.pipeline("realm-fill-mask", model=<pre-training output dir>/encoder)`

work like the built-in tasks. Registration uses `transformers.pipelines.PIPELINE_REGISTRY.register_pipeline` (the
public hook for custom tasks), with the realm_hf model class as the task's PyTorch model class.

The other names below are imported from their submodules on first access.
"""

from __future__ import annotations

from .. import _lazy_exports


__getattr__, __dir__, __all__ = _lazy_exports(
    __name__,
    {
        "fill_mask": ["FILL_MASK_TASK", "RealmFillMaskPipeline", "beam_search"],
        "index_loading": ["load_index_for_model", "resolve_model_dir"],
        "open_qa": ["OPEN_QA_TASK", "OpenDomainQuestionAnsweringPipeline", "add_question_answering_hint"],
    },
)
__all__ += ["register_pipelines"]


def register_pipelines() -> None:
    """Register the REALM tasks with transformers (idempotent: a task already bound to our class is left alone)."""
    from transformers.pipelines import PIPELINE_REGISTRY

    from ..modeling import RealmForOpenQA, RealmKnowledgeEncoder
    from .fill_mask import FILL_MASK_TASK, RealmFillMaskPipeline
    from .open_qa import OPEN_QA_TASK, OpenDomainQuestionAnsweringPipeline, add_question_answering_hint

    for task, pipeline_class, model_class in (
        (OPEN_QA_TASK, OpenDomainQuestionAnsweringPipeline, RealmForOpenQA),
        (FILL_MASK_TASK, RealmFillMaskPipeline, RealmKnowledgeEncoder),
    ):
        current = PIPELINE_REGISTRY.supported_tasks.get(task)
        if current is not None and current.get("impl") is pipeline_class:
            continue
        PIPELINE_REGISTRY.register_pipeline(task, pipeline_class=pipeline_class, pt_model=model_class, type="text")
    add_question_answering_hint()
