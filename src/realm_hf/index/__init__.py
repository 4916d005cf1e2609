"""MIPS index over cached document embeddings: build, search, save/load, shard, refresh in the background.

The index knows models only through an "embed these token batches" callable
`embed_fn(batch) -> [N, D]` (or an object with `embed_documents`, such as `RealmRetriever`).

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "backends": ["FaissBackend", "TorchExactBackend"],
        "embedding": ["embed_blocks"],
        "manifest": ["IndexManifest", "fingerprint_module", "fingerprint_state_dict"],
        "mips": ["RealmIndex"],
        "pacing": ["BuildPacer"],
        "refresh": ["IndexRefresher"],
        "refresh_schedule": ["RefreshSchedule"],
        "sharded": ["ShardedRealmIndex"],
    },
)
