"""A batched `datasets.map` cached in a folder of ours under a fingerprint we compute: the one way the corpus blocks,
the masked sentences and the ICT examples are made (and found again on the next run)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["cache_file", "cached_map"]


def cache_file(cache_dir: str | os.PathLike | None, name: str) -> str | None:
    """`<cache_dir>/<name>` (the folder made when missing), or None without a `cache_dir`."""
    if cache_dir is None:
        return None
    os.makedirs(cache_dir, exist_ok=True)
    return os.path.join(os.fspath(cache_dir), name)


def cached_map(
    dataset: Any,
    function: Callable[..., dict],
    *,
    cache_dir: str | os.PathLike | None,
    name: str,
    fingerprint: str | None,
    features: Any,
    fn_kwargs: dict[str, Any],
    desc: str,
    batch_size: int = 1000,
    num_proc: int | None = None,
    with_indices: bool = False,
) -> Any:
    r"""
    `dataset.map(function, batched=True)` into new rows of `features` (the input's columns dropped).

    Args:
        dataset (`datasets.Dataset`): The input.
        function (`Callable`): The batched function (module level, so that `num_proc` workers can run it).
        cache_dir (`str`, *optional*): Where the result is cached as `name` (None: the `datasets` cache only).
        name (`str`): The cache file's name, e.g. `f"blocks-{fingerprint}.arrow"`.
        fingerprint (`str`, *optional*): The result's fingerprint, which names the cache (None: no file of ours).
        features (`datasets.Features`): The columns of the result.
        fn_kwargs (`dict`): Keyword arguments of `function`.
        desc (`str`): The progress bar's label.
        batch_size (`int`, defaults to 1000), with_indices (`bool`): As `datasets.Dataset.map`.
        num_proc (`int`, *optional*): Worker processes (1 or None: this process).
    """
    return dataset.map(
        function,
        with_indices=with_indices,
        batched=True,
        batch_size=batch_size,
        num_proc=num_proc if num_proc and num_proc > 1 else None,
        remove_columns=dataset.column_names,
        features=features,
        fn_kwargs=fn_kwargs,
        cache_file_name=cache_file(cache_dir, name) if fingerprint is not None else None,
        new_fingerprint=fingerprint,
        desc=desc,
    )
