"""Search backends of a [`RealmIndex`]: exact torch matmul + top-k, or a faiss index built from a factory string.

A backend stores vectors under *block ids* (not row positions) so ids survive `add` and `remove`. Both backends
answer `search(queries [B, D], k) -> (scores [B, k], ids [B, k])` with id `-1` (and score `-inf`) where fewer than
`k` hits were found (approximate faiss indexes can come up short).
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ..utils.files import reading_file
from .compressed import COMPRESSED, DEFAULT_NPROBE, DEFAULT_RERANK, MipsToL2, compressed_faiss_index
from .faiss_loader import import_faiss
from .index_types import TORCH_EXACT, is_supported_index_type, unsupported_index_type_message
from .manifest import DAMAGED_INDEX_HINT
from .pacing import pause_point


logger = logging.getLogger(__name__)

FAISS_FILE = "index.faiss"
_ADD_CHUNK = 65_536
_WARNED_NO_FAISS_GPU: set[str] = set()  # devices already told that faiss searches on the CPU


def _as_device(device: str | torch.device | None) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


def _rows_to_tensor(rows: np.ndarray, device: torch.device) -> torch.Tensor:
    with warnings.catch_warnings():
        # memory-mapped embeddings are read-only; we only read the tensor
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(rows).to(device=device, dtype=torch.float32)


class TorchExactBackend:
    r"""
    Exact maximum inner product search with chunked `matmul` + `topk`; needs no faiss.

    Args:
        embeddings (`np.ndarray` of shape `(N, D)`): float32 or float16, possibly memory-mapped; not copied.
        ids (`np.ndarray` of shape `(N,)`): int64 block id of every row.
        device (`str` or `torch.device`, *optional*): Where to compute. On an accelerator the matrix is cached there.
        chunk_size (`int`, defaults to 65536): Rows scored at a time, bounding memory to `B * chunk_size` floats.
    """

    index_type = TORCH_EXACT

    def __init__(
        self,
        embeddings: np.ndarray,
        ids: np.ndarray,
        device: str | torch.device | None = None,
        chunk_size: int = 65_536,
    ) -> None:
        self.device = _as_device(device)
        self.chunk_size = int(chunk_size)
        self.search_params: dict[str, Any] = {}
        self.set_data(embeddings, ids)

    @property
    def ntotal(self) -> int:
        return int(self.ids.shape[0])

    def set_data(self, embeddings: np.ndarray, ids: np.ndarray) -> None:
        """Point the backend at a new embedding matrix (after `add` / `remove` on the owning index)."""
        self.embeddings = embeddings  # [N, D]
        self.ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))  # [N]
        self._device_matrix = None
        self._device_ids = self.ids  # [N] on the search device (copied once, not at every search)
        if self.device.type != "cpu":
            self._device_matrix = _rows_to_tensor(np.asarray(embeddings), self.device)  # [N, D]
            self._device_ids = self.ids.to(self.device)

    def add(self, embeddings: np.ndarray, ids: np.ndarray, all_embeddings: np.ndarray, all_ids: np.ndarray) -> None:
        self.set_data(all_embeddings, all_ids)

    def remove(self, ids: np.ndarray, kept_embeddings: np.ndarray, kept_ids: np.ndarray) -> None:
        self.set_data(kept_embeddings, kept_ids)

    @torch.no_grad()
    def search(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        queries = queries.to(device=self.device, dtype=torch.float32)  # [B, D]
        batch = queries.shape[0]
        best_scores = torch.full((batch, 0), float("-inf"), device=self.device)  # [B, <=k]
        best_rows = torch.zeros((batch, 0), dtype=torch.long, device=self.device)  # [B, <=k]
        for start in range(0, self.ntotal, self.chunk_size):
            stop = min(start + self.chunk_size, self.ntotal)
            if self._device_matrix is not None:
                chunk = self._device_matrix[start:stop].float()  # [C, D]
            else:
                chunk = _rows_to_tensor(self.embeddings[start:stop], self.device)  # [C, D]
            scores = queries @ chunk.T  # [B, C]
            top_scores, top_rows = scores.topk(min(k, stop - start), dim=1)  # [B, c]
            merged_scores = torch.cat([best_scores, top_scores], dim=1)
            merged_rows = torch.cat([best_rows, top_rows + start], dim=1)
            best_scores, order = merged_scores.topk(min(k, merged_scores.shape[1]), dim=1)  # [B, <=k]
            best_rows = merged_rows.gather(1, order)
        ids = self._device_ids[best_rows]  # [B, <=k]
        if best_rows.shape[1] < k:  # fewer rows than k: pad like faiss does
            pad = k - best_rows.shape[1]
            best_scores = torch.cat([best_scores, best_scores.new_full((batch, pad), float("-inf"))], dim=1)
            ids = torch.cat([ids, ids.new_full((batch, pad), -1)], dim=1)
        return best_scores.cpu(), ids.cpu()

    def save(self, directory: str) -> None:
        """Nothing to write: the exact backend is the embedding matrix itself."""

    def to(self, device: str | torch.device | None) -> TorchExactBackend:
        return TorchExactBackend(self.embeddings, self.ids.numpy(), device=device, chunk_size=self.chunk_size)


def _unwrap(index: Any) -> list[Any]:
    """The chain of (downcast) faiss indexes from the outermost wrapper to the innermost storage."""
    faiss = import_faiss()
    chain = []
    index = faiss.downcast_index(index)
    while True:
        chain.append(index)
        if isinstance(index, (faiss.IndexIDMap2, faiss.IndexIDMap, faiss.IndexPreTransform)):
            index = faiss.downcast_index(index.index)
        elif isinstance(index, faiss.IndexRefine):
            index = faiss.downcast_index(index.base_index)
        else:
            return chain


def _ivf_keeps_ids(index: Any) -> bool:
    """Whether `index` is an IVF index, possibly behind pre-transforms (such indexes store ids in their lists)."""
    faiss = import_faiss()
    chain = _unwrap(index)
    return isinstance(chain[-1], faiss.IndexIVF) and all(isinstance(i, faiss.IndexPreTransform) for i in chain[:-1])


class FaissBackend:
    r"""
    A faiss index with `METRIC_INNER_PRODUCT` built from a factory string, holding block ids; or the `"compressed"`
    preset, an L2 index over the [`MipsToL2`] transform of the vectors (see `realm_hf.index.compressed`).

    IVF indexes store ids natively; every other type is wrapped in an `IndexIDMap2`. Search parameters default to
    values that keep recall high on REALM-sized corpora and can be overridden.

    Args:
        index (`faiss.Index`): The CPU index (the one that is saved, added to and removed from).
        index_type (`str`): The factory string it was built from, or `"compressed"`.
        search_params (`dict`, *optional*): `nprobe` (IVF), `efSearch` (HNSW), `k_factor` (refine), `rerank` (any
            type: candidates per query that [`RealmIndex`] re-scores exactly with its stored embeddings; 0: off).
        device (`str` or `torch.device`, *optional*): A CUDA device moves the index to all GPUs when faiss-gpu is
            installed (types the GPU lacks, such as HNSW, stay on CPU with a warning).
        transform ([`MipsToL2`], *optional*): Required by, and only used with, `index_type="compressed"`.
    """

    def __init__(
        self,
        index: Any,
        index_type: str,
        search_params: dict[str, Any] | None = None,
        device: str | torch.device | None = None,
        transform: MipsToL2 | None = None,
    ) -> None:
        if index_type == COMPRESSED and transform is None:
            raise ValueError(
                "index_type='compressed' needs its MipsToL2 transform (the manifest's max_norm); rebuild the index."
            )
        if index_type != COMPRESSED and transform is not None:
            raise ValueError(f"index_type={index_type!r} takes no MipsToL2 transform (only 'compressed' does).")
        self.index = index
        self.index_type = index_type
        self.transform = transform
        self.device = _as_device(device)
        self.search_params = self._apply_search_params(dict(search_params or {}))
        self._search_index = self._to_gpu_if_requested()

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    @classmethod
    def build(
        cls,
        embeddings: np.ndarray,
        ids: np.ndarray,
        index_type: str,
        search_params: dict[str, Any] | None = None,
        device: str | torch.device | None = None,
        train_size: int = 262_144,
        seed: int = 0,
    ) -> FaissBackend:
        r"""
        Create the faiss index from `index_type`, train it on a sample of `embeddings` if needed, and add them.

        Args:
            embeddings (`np.ndarray` of shape `(N, D)`): The document embeddings.
            ids (`np.ndarray` of shape `(N,)`): Block ids to store.
            index_type (`str`): Factory string: `"Flat"`, `"HNSW32"`, `"IVF1024,PQ32"`, `"IVF1024,PQ32,RFlat"`,
                `"IVF1024,PQ32,Refine(Flat)"`, `"SQfp16"`, ...; or `"compressed"` (see `realm_hf.index.compressed`).
            search_params (`dict`, *optional*): See the class docstring.
            device (`str` or `torch.device`, *optional*): See the class docstring.
            train_size (`int`, defaults to 262144): Rows sampled (seeded) to train IVF/PQ quantizers.
            seed (`int`, defaults to 0): Seed of the training sample.
        """
        dim, trained_on = int(embeddings.shape[1]), min(train_size, len(embeddings))  # the bounds of its numbers
        if not is_supported_index_type(index_type, dim, trained_on):
            raise ValueError(unsupported_index_type_message(index_type, "index_type", dim, trained_on))
        faiss = import_faiss()
        transform = MipsToL2.fit(embeddings) if index_type == COMPRESSED else None
        try:
            if transform is not None:
                base = compressed_faiss_index(dim, len(embeddings))
                search_params = {"nprobe": DEFAULT_NPROBE, "rerank": DEFAULT_RERANK, **(search_params or {})}
            else:
                base = faiss.index_factory(dim, index_type, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as err:
            raise ValueError(
                f"faiss cannot build index_type={index_type!r} ({str(err).strip().splitlines()[-1]}). Use a faiss "
                "factory string such as 'Flat', 'HNSW32', 'IVF1024,PQ32', 'IVF1024,PQ32,RFlat', 'SQfp16', "
                f"or {COMPRESSED!r} or 'torch-exact'."
            ) from err
        for level in _unwrap(base):
            if hasattr(level, "do_polysemous_training"):
                level.do_polysemous_training = False  # slow, and only useful for Hamming filtering, unused here
        if not base.is_trained:
            rng = np.random.default_rng(seed)
            rows = np.sort(rng.choice(len(embeddings), size=min(train_size, len(embeddings)), replace=False))
            train = np.ascontiguousarray(embeddings[rows], dtype=np.float32)  # [T, D]
            if transform is not None:
                train = transform.documents(train)  # [T, D + 1]
            logger.info("Training faiss %s on %d of %d vectors", index_type, len(train), len(embeddings))
            base.train(train)
        # IDMap2 over IVF breaks remove_ids (IVF keeps stale positions), so IVF keeps ids itself. Keep `base`, the
        # owning Python object: a downcast proxy does not own the C++ index and would dangle once `base` is freed.
        index = base if _ivf_keeps_ids(base) else faiss.IndexIDMap2(base)
        backend = cls(index, index_type, search_params=search_params, device=None, transform=transform)
        backend._add_chunks(embeddings, ids)
        backend.device = _as_device(device)
        backend._search_index = backend._to_gpu_if_requested()
        return backend

    def _add_chunks(self, embeddings: np.ndarray, ids: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        for start in tqdm(
            range(0, len(embeddings), _ADD_CHUNK),
            desc=f"faiss add ({self.index_type})",
            disable=len(embeddings) <= _ADD_CHUNK,
        ):
            pause_point()  # a paced background build waits here for the trainer's next slice
            rows = np.ascontiguousarray(embeddings[start : start + _ADD_CHUNK], dtype=np.float32)  # [C, D]
            if self.transform is not None:
                rows = self.transform.documents(rows)  # [C, D + 1]
            self.index.add_with_ids(rows, np.ascontiguousarray(ids[start : start + _ADD_CHUNK]))

    def _apply_search_params(self, params: dict[str, Any]) -> dict[str, Any]:
        faiss = import_faiss()
        applied: dict[str, Any] = {}
        rerank = params.pop("rerank", 0)
        if isinstance(rerank, bool) or not isinstance(rerank, (int, np.integer)) or rerank < 0:
            raise ValueError(f"rerank must be an integer >= 0 (candidates re-scored exactly; 0: off), got {rerank!r}.")
        if rerank:
            applied["rerank"] = int(rerank)  # carried out by RealmIndex, which holds the embeddings
        for level in _unwrap(self.index):
            if isinstance(level, faiss.IndexIVF):
                default = min(level.nlist, max(8, level.nlist // 16))
                level.nprobe = applied["nprobe"] = int(params.pop("nprobe", default))
            elif isinstance(level, faiss.IndexHNSW):
                level.hnsw.efSearch = applied["efSearch"] = int(params.pop("efSearch", 128))
            elif isinstance(level, faiss.IndexRefine):
                level.k_factor = applied["k_factor"] = float(params.pop("k_factor", 4.0))
        if params:
            raise ValueError(
                f"Search parameters {sorted(params)} do not apply to index_type={self.index_type!r}; "
                "use nprobe (IVF), efSearch (HNSW), k_factor (Refine/RFlat) or rerank (any faiss type)."
            )
        return applied

    def _to_gpu_if_requested(self) -> Any:
        if self.device.type != "cuda":
            return self.index
        faiss = import_faiss()
        if not hasattr(faiss, "index_cpu_to_all_gpus") or faiss.get_num_gpus() == 0:
            if str(self.device) not in _WARNED_NO_FAISS_GPU:  # once per process: a trainer loads an index per refresh
                _WARNED_NO_FAISS_GPU.add(str(self.device))
                logger.warning(
                    "device=%s requested but faiss has no GPUs (install realm_hf[faiss-gpu]); searching on CPU",
                    self.device,
                )
            return self.index
        try:
            return faiss.index_cpu_to_all_gpus(self.index)
        except RuntimeError as err:
            logger.warning("faiss cannot move %s to GPU (%s); searching on CPU", self.index_type, err)
            return self.index

    def search(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        array = np.ascontiguousarray(queries.detach().to("cpu", torch.float32).numpy())  # [B, D]
        if self.transform is None:
            scores, ids = self._search_index.search(array, k)  # [B, k], [B, k]
        else:
            distances, ids = self._search_index.search(self.transform.queries(array), k)  # [B, k] ascending L2
            scores = self.transform.inner_products(array, distances).astype(np.float32)  # [B, k] descending q·x
        scores = torch.from_numpy(scores)
        ids = torch.from_numpy(ids)
        return scores.masked_fill(ids < 0, float("-inf")), ids

    def add(self, embeddings: np.ndarray, ids: np.ndarray, all_embeddings: np.ndarray, all_ids: np.ndarray) -> None:
        self._add_chunks(embeddings, ids)
        self._search_index = self._to_gpu_if_requested()

    def remove(self, ids: np.ndarray, kept_embeddings: np.ndarray, kept_ids: np.ndarray) -> None:
        faiss = import_faiss()
        chain = _unwrap(self.index)
        in_place = _ivf_keeps_ids(self.index) or (
            isinstance(chain[0], faiss.IndexIDMap2) and isinstance(chain[1], faiss.IndexFlatCodes) and len(chain) == 2
        )
        if in_place:
            self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64))
        else:
            logger.info(
                "faiss %s cannot remove vectors in place; re-adding the %d stored embeddings "
                "(trained quantizers kept)",
                self.index_type,
                len(kept_ids),
            )
            self.index.reset()
            self._add_chunks(kept_embeddings, kept_ids)
        self._search_index = self._to_gpu_if_requested()

    def save(self, directory: str) -> None:
        import_faiss().write_index(self.index, os.path.join(directory, FAISS_FILE))

    @classmethod
    def load(
        cls,
        directory: str,
        index_type: str,
        search_params: dict[str, Any] | None = None,
        device: str | torch.device | None = None,
        transform: MipsToL2 | None = None,
    ) -> FaissBackend:
        """Read `index.faiss` from `directory`; `transform` is the saved [`MipsToL2`] of a `"compressed"` index."""
        path = os.path.join(directory, FAISS_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Missing {FAISS_FILE} in {directory} (index_type={index_type!r} needs it).")
        faiss = import_faiss()
        with reading_file(path, DAMAGED_INDEX_HINT):
            index = faiss.read_index(path)
        return cls(index, index_type, search_params=search_params, device=device, transform=transform)

    def to(self, device: str | torch.device | None) -> FaissBackend:
        return FaissBackend(
            self.index, self.index_type, search_params=self.search_params, device=device, transform=self.transform
        )
