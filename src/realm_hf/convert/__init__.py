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

The corpus of an old `RealmForOpenQA` is data, not weights: its `block_emb` is never a model buffer here. An old
Open-QA folder (`config.json`, weights, tokenizer, `block_records.npy`) converts in one call into a folder that the
`realm-open-qa` pipeline and `realm-hf ask` answer with: the model, its tokenizer, `conversion.json` and `index/`,
whose blocks are the old block records (read by `block_records` from the pickle stream's opcodes, never unpickled,
streamed) and whose embeddings are the old `block_emb` (copied, not re-embedded). The converted model answers as the
old one did (`answer_rule="best_span"`, a reader normalized over all the blocks it reads).

Weights are read from `model.safetensors` when present (preferred), otherwise from `pytorch_model.bin` with
`torch.load(..., weights_only=True)` (no arbitrary unpickling); sharded checkpoints (`*.index.json`) work too.

Command line (`realm-hf convert --help`):

    realm-hf convert --src realm-cc-news-pretrained-embedder --output converted/embedder
    realm-hf convert --src realm-orqa-nq-openqa --output converted/orqa-nq     # + index/ from its corpus

Modules: `checkpoint` reads old checkpoints and tells their kind, `configs` maps an old `RealmConfig` onto the new
configs, `mapping` fills a model from an old state dict, `converters` holds one converter per old class and
`convert_checkpoint`, `block_records` reads the old corpus texts safely, `corpus` writes the index directory,
`command_line` the command.
"""

from .block_records import BlockRecordsError, count_block_records, iter_block_records
from .checkpoint import (
    KINDS, BlockEmbeddingFile, RealmCheckpoint, RealmConversionError, detect_kind, find_block_embeddings,
    load_realm_checkpoint,
)
from .command_line import main
from .converters import (
    CONVERSION_FILE, GOOGLE_CHECKPOINTS, convert_checkpoint, convert_embedder, convert_knowledge_encoder,
    convert_open_qa, convert_reader, extract_block_embeddings, source_repo_id,
)
from .corpus import convert_corpus, default_index_type

__all__ = [
    "CONVERSION_FILE",
    "GOOGLE_CHECKPOINTS",
    "KINDS",
    "BlockEmbeddingFile",
    "BlockRecordsError",
    "convert_corpus",
    "count_block_records",
    "default_index_type",
    "find_block_embeddings",
    "iter_block_records",
    "source_repo_id",
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
