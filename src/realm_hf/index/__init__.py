"""MIPS index over cached document embeddings: build, search, save/load, shard, refresh in the background.

The index knows models only through an "embed these token batches" callable
`embed_fn(batch) -> [N, D]` (or an object with `embed_documents`, such as `RealmRetriever`).
"""

from .backends import FaissBackend, TorchExactBackend
from .embedding import embed_blocks
from .manifest import IndexManifest, fingerprint_module, fingerprint_state_dict
from .mips import RealmIndex
from .refresh import IndexRefresher, RefreshSchedule
from .sharded import ShardedRealmIndex


__all__ = [
    "FaissBackend",
    "IndexManifest",
    "IndexRefresher",
    "RealmIndex",
    "RefreshSchedule",
    "ShardedRealmIndex",
    "TorchExactBackend",
    "embed_blocks",
    "fingerprint_module",
    "fingerprint_state_dict",
]
