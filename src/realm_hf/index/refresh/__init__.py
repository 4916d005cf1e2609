"""Asynchronous index refresh, the trainer's side: [`IndexRefresher`] (REALM's trainer / index-builder pair).

Protocol: the trainer hands a snapshot of the document tower to a background builder (a `spawn`ed process by
default, or a thread); the builder (`index.refresh_job`) re-embeds the corpus, writes the new index to a fresh
directory `<root>/index-<step>` (atomically) and then points `<root>/LATEST` at it (atomically); between steps the
trainer polls with [`IndexRefresher.maybe_swap`] and swaps the new index in. A crashed builder never touches the index
in use: the trainer keeps it and a warning is logged; a builder killed by a signal (kill -9, the OOM killer) is
restarted at once from the same snapshot (a bounded number of times), any other failure waits for the next request. A
published index that does not load (damaged faiss file, checksum or fingerprint mismatch) is rejected with a warning
and the old one kept. In thread mode the build can be paced (`time_share`): it then runs on the trainer's own thread (a
greenlet), only between the trainer's steps, for a fixed share of the trainer's time (`index.pacing`), instead of
competing with it for the cores. When to refresh: `index.refresh_schedule`.

By concern:

- `refresher`: [`IndexRefresher`], the state machine over the builds (requests, polls, restarts, swaps, the builds a
  checkpoint records as in flight);
- `builds`: one build's record, its snapshot and job files, and its worker in either mode (process or thread);
- `versions`: the `index-<step>` directories and `LATEST` on disk, and their clean-up (`keep_last`, pins);
- `threads`: the trainer's torch threads while a builder process runs;
- `options`: the checks of the refresher's options.

No pickle of tensors: the snapshot travels as a safetensors file, the builder as an import path string
(`"package.module:function"`), its arguments as JSON.
"""

from .refresher import IndexRefresher

__all__ = ["IndexRefresher"]
