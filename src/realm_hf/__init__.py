"""realm_hf: REALM (Retrieval-Augmented Language Model pre-training) for the Hugging Face ecosystem.

`import realm_hf` is cheap: it imports none of torch, transformers, datasets or faiss. Each public name is imported
from its submodule on first access (`from realm_hf import RealmRetriever` loads the models then); the subpackages
(`realm_hf.index`, `realm_hf.corpus`, ...) work the same way.

Registration with transformers: the configs with `AutoConfig`, the models with `AutoModel` and the pipelines
"open-domain-question-answering" (short name "realm-open-qa") and "realm-fill-mask" with `transformers.pipeline`,
through transformers' public registration API (`realm_hf.registration`). It happens

- at `import realm_hf`, for what transformers has already loaded: `from transformers import pipeline` (or
  `AutoModel`) then `import realm_hf` registers the tasks (or the models) at once;
- when a name is taken from `realm_hf` (`from realm_hf import RealmForOpenQA`), for what transformers has loaded by
  then and for the classes the name loaded (a model name registers the configs and the models);
- or explicitly, all of it: `realm_hf.register_auto_classes()`.

transformers offers no deferred registration (its Auto mappings take classes, not names), so `import realm_hf`
*before* transformers registers nothing yet: import transformers first, use a realm_hf name, or call
`register_auto_classes()`.
"""

from __future__ import annotations

from .registration import register_auto_classes, register_what_is_loaded
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
