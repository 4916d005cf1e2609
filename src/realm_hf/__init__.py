"""realm_hf: REALM (Retrieval-Augmented Language Model pre-training) for the Hugging Face ecosystem.

Importing the package registers the configs and models with transformers' Auto classes.
"""

from transformers import AutoConfig, AutoModel

from .configuration import (
    RealmForOpenQAConfig,
    RealmKnowledgeEncoderConfig,
    RealmReaderConfig,
    RealmRetrieverConfig,
)
from .modeling import (
    RealmForOpenQA,
    RealmForOpenQAOutput,
    RealmKnowledgeEncoder,
    RealmKnowledgeEncoderOutput,
    RealmReader,
    RealmReaderOutput,
    RealmRetriever,
    RealmRetrieverOutput,
)

__version__ = "0.1.0.dev0"

for _config, _model in (
    (RealmRetrieverConfig, RealmRetriever),
    (RealmKnowledgeEncoderConfig, RealmKnowledgeEncoder),
    (RealmReaderConfig, RealmReader),
    (RealmForOpenQAConfig, RealmForOpenQA),
):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)

__all__ = [
    "RealmForOpenQA",
    "RealmForOpenQAConfig",
    "RealmForOpenQAOutput",
    "RealmKnowledgeEncoder",
    "RealmKnowledgeEncoderConfig",
    "RealmKnowledgeEncoderOutput",
    "RealmReader",
    "RealmReaderConfig",
    "RealmReaderOutput",
    "RealmRetriever",
    "RealmRetrieverConfig",
    "RealmRetrieverOutput",
]

# The transformers pipelines "open-domain-question-answering" and "realm-fill-mask" (see realm_hf.pipelines).
from .pipelines import OpenDomainQuestionAnsweringPipeline, RealmFillMaskPipeline, register_pipelines

register_pipelines()
__all__ += ["OpenDomainQuestionAnsweringPipeline", "RealmFillMaskPipeline", "register_pipelines"]
