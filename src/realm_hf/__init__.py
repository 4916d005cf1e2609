"""realm_hf: REALM (Retrieval-Augmented Language Model pre-training) for the Hugging Face ecosystem.

`import realm_hf` is cheap: it imports transformers' lazy top-level module and none of torch, datasets or faiss. Each
public name is imported from its submodule on first access (`from realm_hf import RealmRetriever` loads the models
then); the subpackages (`realm_hf.index`, `realm_hf.corpus`, ...) work the same way.

Registration with transformers, in either import order: the configs with `AutoConfig`, the models with `AutoModel`
and the pipelines "open-domain-question-answering" (short name "realm-open-qa") and "realm-fill-mask" with
`transformers.pipeline`, through transformers' public registration API (`realm_hf.registration`). Each part is
registered as soon as transformers has loaded the module it extends: at `import realm_hf` for what is loaded then,
later by the import that loads it (`import realm_hf` then `from transformers import pipeline` registers the tasks
before that line returns). `realm_hf.register_auto_classes()` registers everything at once.
"""

from __future__ import annotations

from .registration import register_auto_classes, register_what_is_loaded, watch_transformers
from .utils.lazy import lazy_exports


__version__ = "0.1.0.dev0"


# ----------------------------------------------------------------------------------------------------- lazy names
_EXPORTS = {
    "configuration": ["RealmForOpenQAConfig", "RealmKnowledgeEncoderConfig", "RealmReaderConfig", "RealmRetrieverConfig"],
    # the corpus index a model retrieves from (data, not weights; imports faiss only when used)
    "index": ["RealmIndex"],
    "modeling": [
        "RealmForOpenQA",
        "RealmForOpenQAOutput",
        "RealmKnowledgeEncoder",
        "RealmKnowledgeEncoderOutput",
        "RealmReader",
        "RealmReaderOutput",
        "RealmRetriever",
        "RealmRetrieverOutput",
    ],
    "pipelines": ["OpenDomainQuestionAnsweringPipeline", "RealmFillMaskPipeline", "register_pipelines"],
}
_lazy_getattr, __dir__, _lazy_names = lazy_exports(__name__, _EXPORTS, cache=False)
__all__ = [*_lazy_names, "register_auto_classes"]


def __getattr__(name: str):
    value = _lazy_getattr(name)  # an AttributeError leaves registration alone
    register_what_is_loaded()  # on every access: a name taken after transformers' pipelines were imported registers them
    return value


register_what_is_loaded()
watch_transformers()  # what transformers loads later registers then (realm_hf.registration)
