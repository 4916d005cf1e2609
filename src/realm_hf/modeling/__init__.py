"""REALM models: retriever, knowledge-augmented encoder, reader and the Open-QA model."""

from .knowledge_encoder import RealmKnowledgeEncoder, marginalize_over_candidates
from .open_qa import RealmForOpenQA
from .outputs import RealmForOpenQAOutput, RealmKnowledgeEncoderOutput, RealmReaderOutput, RealmRetrieverOutput
from .reader import RealmReader
from .retriever import RealmRetriever

__all__ = [
    "RealmForOpenQA",
    "RealmForOpenQAOutput",
    "RealmKnowledgeEncoder",
    "RealmKnowledgeEncoderOutput",
    "RealmReader",
    "RealmReaderOutput",
    "RealmRetriever",
    "RealmRetrieverOutput",
    "marginalize_over_candidates",
]
