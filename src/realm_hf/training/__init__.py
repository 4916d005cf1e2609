"""Training: the shared Accelerate loop, REALM pre-training with asynchronous index refresh.

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "arguments": [
            "CorpusArguments",
            "IctArguments",
            "LoopArguments",
            "MlmArguments",
            "ModelArguments",
            "OpenQaArguments",
            "PretrainingArguments",
        ],
        "argument_parsing": ["parse_arguments"],
        "entry_points": ["main_evaluate", "main_finetune", "main_ict", "main_mlm", "main_pretrain"],
        "loop": ["TrainingLoop", "latest_checkpoint"],
        "mlm": ["MlmTrainer"],
        "pretrain": ["RealmPretrainer"],
        "soup": ["average_open_qa_models", "average_state_dicts"],
    },
)
