"""Training: the shared Accelerate loop, REALM pre-training with asynchronous index refresh."""

from .arguments import CorpusArguments, IctArguments, LoopArguments, ModelArguments, PretrainingArguments, parse_arguments
from .loop import TrainingLoop, latest_checkpoint
from .pretrain import RealmPretrainer

__all__ = [
    "CorpusArguments",
    "IctArguments",
    "LoopArguments",
    "ModelArguments",
    "PretrainingArguments",
    "RealmPretrainer",
    "TrainingLoop",
    "latest_checkpoint",
    "parse_arguments",
]
