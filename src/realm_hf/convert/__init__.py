"""Convert transformers-REALM checkpoints (the `google/realm-*` family) into realm_hf models.

transformers shipped REALM as `RealmEmbedder` / `RealmScorer`, `RealmKnowledgeAugEncoder`, `RealmReader` and
`RealmForOpenQA` (all with `model_type: "realm"`) and deleted them in v5. Their checkpoints map onto realm_hf:

| old class (released checkpoint)                               | realm_hf model          | kind       |
|---------------------------------------------------------------|-------------------------|------------|
| `RealmEmbedder` (`google/realm-cc-news-pretrained-embedder`)  | `RealmRetriever`        | `embedder` |
| `RealmScorer` (`google/realm-cc-news-pretrained-scorer`)      | `RealmRetriever`        | `embedder` |
| `RealmKnowledgeAugEncoder` (`...-pretrained-encoder`)         | `RealmKnowledgeEncoder` | `encoder`  |
| `RealmReader`                                                 | `RealmReader`           | `reader`   |
| `RealmForOpenQA` (`google/realm-orqa-{nq,wq}-openqa`)         | `RealmForOpenQA`        | `openqa`   |

Every tensor name is mapped by an explicit table of prefix renames. The old classes carry a few tensors that have no
role in their forward pass (the MLM head inside `RealmEmbedder` and `RealmReader`, the BERT pooler of the encoder and
the reader); those are dropped by name, with the reason logged. Anything else that is not consumed, and any tensor of
the new model that is not filled, is an error that lists the names.

The corpus embeddings `block_emb` of an old `RealmForOpenQA` are data, not weights: they are never a model buffer
here. [`extract_block_embeddings`] returns them, and [`convert_checkpoint`] writes them to a separate safetensors
file on request, for the index builder.

Weights are read from `model.safetensors` when present (preferred), otherwise from `pytorch_model.bin` with
`torch.load(..., weights_only=True)` (no arbitrary unpickling); sharded checkpoints (`*.index.json`) work too.

Command line (`python -m realm_hf.convert --help`):

    python -m realm_hf.convert --src path/to/realm-cc-news-pretrained-embedder --output converted/embedder
    python -m realm_hf.convert --src path/to/realm-orqa-nq-openqa --output converted/orqa-nq \
        --block-embeddings converted/orqa-nq-block-embeddings.safetensors

Modules: `checkpoint` reads old checkpoints and tells their kind, `configs` maps an old `RealmConfig` onto the new
configs, `mapping` fills a model from an old state dict, `converters` holds one converter per old class and
`convert_checkpoint`, `command_line` the command.
"""

from .checkpoint import KINDS, RealmCheckpoint, RealmConversionError, detect_kind, load_realm_checkpoint
from .command_line import main
from .converters import (
    convert_checkpoint, convert_embedder, convert_knowledge_encoder, convert_open_qa, convert_reader,
    extract_block_embeddings,
)

__all__ = [
    "KINDS",
    "RealmCheckpoint",
    "RealmConversionError",
    "convert_checkpoint",
    "convert_embedder",
    "convert_knowledge_encoder",
    "convert_open_qa",
    "convert_reader",
    "detect_kind",
    "extract_block_embeddings",
    "load_realm_checkpoint",
    "main",
]
