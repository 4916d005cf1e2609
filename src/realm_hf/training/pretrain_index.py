"""The index of REALM pre-training over a run: the initial build, the asynchronous refresh and the swap between steps,
the index a checkpoint names and its restoration on resume, and the final index of the last document tower.

[`PretrainingIndexMixin`] is the index side of [`RealmPretrainer`], apart from its step and its retriever schedule.
"""

from __future__ import annotations

import logging
import os

import datasets
import torch
from accelerate.utils import broadcast_object_list, gather_object

from ..index import IndexRefresher, RealmIndex, RefreshSchedule, ShardedRealmIndex
from ..index.atomic import atomic_directory
from ..index.manifest import fingerprint_module
from ..utils.files import read_json_file
from ..utils.quiet import quiet_checkpoint_io
from .index_builder import build_index_from_snapshot
from .loop import CHECKPOINT_HINT, TRAINER_STATE, complete_checkpoints, resolve_checkpoint
from ..utils.precision import autocast_dtype
from .pretraining_data import blocks_checksum
from .zero3 import is_partitioned, whole_copy, whole_fingerprint, whole_parameters, whole_state_dict

logger = logging.getLogger(__name__)

__all__ = ["PretrainingIndexMixin"]


class PretrainingIndexMixin:
    r"""
    The index of a pre-training run, for a [`TrainingLoop`] subclass that sets `accelerator`, `args` (the
    [`LoopArguments`]), `corpus_args`, `pretraining_args`, `tokenizer`, `blocks` (the corpus blocks), `step` and a
    `retriever` property (the unwrapped [`RealmRetriever`]).

    Attributes set by `_prepare_index`: `index` (the [`RealmIndex`] in use, or with `shard_index` on several
    processes the [`ShardedRealmIndex`] whose shard this rank holds; None until a resumed run loads its checkpoint's),
    `index_root` (`<output_dir>/index`), `versions_root` (where the `index-<step>` directories of the versions are:
    `index_root`, or `index_root/shard-<rank>-of-<N>` for a rank's shard) and `refresher` (the [`IndexRefresher`] on
    the main process, None elsewhere; sharded: one on every rank, refreshing its shard).
    """

    def _prepare_index(self, work: str) -> None:
        """Save what the builder process needs, build the initial index, start the refresher (main process).

        When the run resumes from a complete checkpoint, the initial index is not built: embedding the corpus with
        the initial weights would be a whole corpus pass for nothing, since `load_extra_state` replaces it by the index
        the checkpoint names (`self.index` stays None until then)."""
        self.retriever_dir = os.path.join(work, "retriever-init")
        self.blocks_dir = os.path.join(work, "blocks")
        with whole_parameters(self.accelerator, self.retriever):  # every rank: ZeRO-3 gathers the weights
            if self.accelerator.is_main_process:
                self.retriever.save_pretrained(self.retriever_dir)
        if self.accelerator.is_main_process:
            self.tokenizer.save_pretrained(self.retriever_dir)
            if not os.path.isdir(self.blocks_dir):
                with quiet_checkpoint_io(), atomic_directory(self.blocks_dir) as tmp:  # a copy: no bar
                    self.blocks.save_to_disk(tmp)
        self.accelerator.wait_for_everyone()
        # read from that copy from now on: every index version and checkpoint hard-links its files (the corpus is
        # stored once per run, see index.storage.save_blocks)
        saved = datasets.load_from_disk(self.blocks_dir)
        if len(saved) != len(self.blocks) or blocks_checksum(saved) != blocks_checksum(self.blocks):
            raise ValueError(
                f"{self.blocks_dir} holds {len(saved)} blocks of another corpus than this run's {len(self.blocks)} "
                f"(another --corpus, --max_articles or --block_length in the same output_dir): use a new output_dir, "
                f"or delete {self.blocks_dir} (and pass --overwrite_output_dir) to start over."
            )
        self.blocks = saved
        self.index_root = os.path.join(self.args.output_dir, "index")
        rank, world_size = self.accelerator.process_index, self.accelerator.num_processes
        # the versions of the index (sharded: of this rank's shard), one `index-<step>` directory each
        self.versions_root = (
            os.path.join(self.index_root, f"shard-{rank}-of-{world_size}") if self.shards_index else self.index_root
        )
        if self.shards_index:
            logger.info("Sharded index: rank %d of %d embeds, holds and searches 1/%d of the blocks", rank,
                        world_size, world_size)
        checkpoint = resolve_checkpoint(self.args.output_dir, self.args.resume_from_checkpoint)
        self.index: RealmIndex | ShardedRealmIndex | None = None
        if checkpoint is not None:
            logger.info("Resuming from %s: its index is loaded instead of building the initial one", checkpoint)
        else:
            self.index = self._build_index_now(step=0)
        self.refresher = None
        # on every rank: under ZeRO-3 all of them gather the document tower for the snapshot of a refresh
        self.refresh_schedule = RefreshSchedule(self.pretraining_args.refresh_schedule)
        if self.accelerator.is_main_process or self.shards_index:  # sharded: every rank refreshes its shard
            if self.index is not None:
                # on disk like every refreshed index, so a checkpoint can name the index it trained with
                self._own_index().save_pretrained(os.path.join(self.versions_root, "index-0"))
            args, resources = self.pretraining_args, self.refresh_resources  # resolved when the trainer was made
            logger.info("Index builder: %s", resources)
            self.refresher = IndexRefresher(
                self.versions_root, build_index_from_snapshot,
                builder_kwargs={
                    "retriever_dir": self.retriever_dir, "blocks_dir": self.blocks_dir,
                    "tokenizer_dir": self.retriever_dir, "index_type": self.corpus_args.index_type,
                    "batch_size": self.corpus_args.embed_batch_size, "dtype": self.corpus_args.embed_dtype,
                    "device": resources.device, "shard": [rank, world_size] if self.shards_index else None,
                },
                mode=resources.refresher_mode,
                load_kwargs={"device": self.accelerator.device},  # searched where the trainer runs (a GPU's matmul)
                schedule=self.refresh_schedule,
                index=self._own_index(), num_threads=resources.num_threads, niceness=resources.niceness,
                trainer_threads=resources.trainer_threads, time_share=resources.time_share,
                max_staleness=args.refresh_max_staleness,
            )

    @property
    def shards_index(self) -> bool:
        """Whether each rank holds only its shard of the index (`shard_index` on several processes)."""
        return self.pretraining_args.shard_index and self.accelerator.num_processes > 1

    def _own_index(self) -> RealmIndex | None:
        """The index this rank refreshes and saves as its versions: its shard's, or the whole one."""
        return self.index.local if isinstance(self.index, ShardedRealmIndex) else self.index

    def _build_index_now(
        self, step: int, index_type: str | None = None, whole: bool = False
    ) -> RealmIndex | ShardedRealmIndex:
        """Embed the corpus now, on every rank (a collective): this rank's shard when the index is sharded (unless
        `whole`), else the whole index, embedded sharded over the ranks and gathered."""
        build = ShardedRealmIndex.build if self.shards_index and not whole else RealmIndex.build
        return build(
            # ranks embed shards of unequal size: under ZeRO-3 each one embeds with a whole copy of the retriever
            self.blocks, whole_copy(self.accelerator, self.retriever), tokenizer=self.tokenizer,
            index_type=index_type or self.corpus_args.index_type,
            batch_size=self.corpus_args.embed_batch_size,
            dtype=autocast_dtype(self.corpus_args.embed_dtype), step=step, device=self.accelerator.device,
        )

    def _doc_tower_snapshot(self) -> dict[str, torch.Tensor]:
        """The document tower's weights for a refresh, which the refresher copies to the CPU as it takes them (every
        rank together under ZeRO-3)."""
        return whole_state_dict(self.accelerator, self.retriever.document_embedder)

    def _swap_refreshed_index(self, step: int, refresh: bool, request: bool = True) -> str | None:
        """Request a refresh when the schedule says so (and `refresh`: no refresh while the retriever is frozen, it
        would rebuild the same index; nor without `request`: the last step only swaps in a finished one) and swap in a
        finished index, the same on every rank. Returns the directory of the index swapped in, or None."""
        if self.shards_index:
            return self._swap_refreshed_shards(step, refresh, request)
        swapped = [None]
        snapshot = None
        if refresh and request and self.refresh_schedule.should_refresh(step):
            if self.refresher is not None or is_partitioned(self.accelerator):  # ZeRO-3: every rank gathers it
                snapshot = self._doc_tower_snapshot()
        if self.refresher is not None and refresh:
            if snapshot is not None:
                self.refresher.request_refresh(step, snapshot)
            new_index = self.refresher.maybe_swap(step)
            if new_index is not None:
                self.index = new_index
                swapped = [os.path.join(self.index_root, f"index-{new_index.step}")]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(swapped)
            if not self.accelerator.is_main_process and swapped[0] is not None:
                self.index = RealmIndex.from_pretrained(swapped[0], device=self.accelerator.device)
        return swapped[0]

    def _swap_refreshed_shards(self, step: int, refresh: bool, request: bool) -> str | None:
        """`_swap_refreshed_index` of a sharded index: every rank refreshes its own shard; the ranks swap when all of
        them have the same refresh finished (two small collectives a step), so that a search merges shards of one
        version."""
        refresher = self.refresher
        if refresh and request and refresher.schedule.should_refresh(step):
            refresher.request_refresh(step, self._doc_tower_snapshot())
        ready = refresher.ready_step(step) if refresh else None  # waits for a build due by refresh_max_staleness
        everyone = gather_object([ready])  # every rank, every step: a rank that skipped it would hang the others
        if ready is None or any(other != ready for other in everyone):
            return None
        local = refresher.maybe_swap(step)
        if local is not None:
            self.index = ShardedRealmIndex(local, self.blocks, len(self.blocks))
        swapped = gather_object([None if local is None else local.step])
        if any(other != ready for other in swapped):
            logger.warning(
                "Rank %d: the shards of the index of step %d were not all swapped in (steps now %s: a shard was "
                "rejected); until the next refresh, searches merge shards of different versions",
                self.accelerator.process_index, ready, swapped,
            )
        return os.path.join(self.versions_root, f"index-{ready}")

    def _load_own_index(self, directory: str, expected_fingerprint: str | None) -> RealmIndex | ShardedRealmIndex:
        """Load an index version of this rank (its shard's, when sharded) onto the trainer's device."""
        index = RealmIndex.from_pretrained(
            directory, expected_fingerprint=expected_fingerprint, device=self.accelerator.device
        )
        return ShardedRealmIndex(index, self.blocks, len(self.blocks)) if self.shards_index else index

    def _restore_index(self, state: dict) -> None:
        """Load the index the checkpoint `state` trained with (rebuilt when it is gone) and take up its refreshes."""
        step = state.get("index_step")
        directory = os.path.join(self.versions_root, f"index-{step}")
        if step is not None and os.path.isdir(directory):
            try:
                self.index = self._load_own_index(directory, state.get("index_fingerprint"))
            except ValueError as err:
                raise ValueError(
                    f"The checkpoint trained with {directory}, which has changed since ({err}). Restore that index, or "
                    "delete the directory to rebuild it from the resumed weights (the run then differs from an "
                    "uninterrupted one)."
                ) from err
        else:
            logger.warning(
                "Index of step %s not on disk (%s); rebuilding it from the resumed weights: the resumed run will not "
                "match an uninterrupted one", step, directory,
            )
            self.index = self._build_index_now(step=self.step)
        if self.refresher is not None:
            self.refresher.index, self.refresher.index_step = self._own_index(), self.index.step or 0
            self.refresher.stats = list(state.get("refresh_stats", []))
            indexes, in_flight = self._steps_named_by_checkpoints()  # keep what every checkpoint names
            self.refresher.pinned |= indexes | in_flight
            self.refresher.kept_snapshots |= in_flight
            self.refresher.resume_in_flight(state.get("refresh_in_flight", []))

    def save_checkpoint(self) -> str:
        if self.shards_index and not self.accelerator.is_main_process:
            # the main process records the refreshes in flight (extra_state); each rank keeps its own shard's
            # snapshots and index versions of them on disk for a resume
            self.refresher.in_flight()
        if self.refresher is not None and self.index.step is not None:
            self.refresher.pin(self.index.step)  # the index a checkpoint names lives as long as the checkpoint
        directory = super().save_checkpoint()
        if self.refresher is not None and self.args.save_total_limit is not None:
            # checkpoints were pruned: the index versions only they named may go at the next cleanup
            indexes, in_flight = self._steps_named_by_checkpoints()
            self.refresher.repin(indexes | in_flight)
        return directory

    def _steps_named_by_checkpoints(self) -> tuple[set[int], set[int]]:
        """The index steps the complete checkpoints of the run name: those they trained with, and the refreshes they
        recorded in flight."""
        indexes, in_flight = set(), set()
        for checkpoint in complete_checkpoints(self.args.output_dir):
            named = read_json_file(os.path.join(checkpoint, TRAINER_STATE), CHECKPOINT_HINT)
            if named.get("index_step") is not None:
                indexes.add(int(named["index_step"]))
            in_flight |= {int(record["step"]) for record in named.get("refresh_in_flight", [])}
        return indexes, in_flight

    def before_final_save(self) -> None:
        """On every rank: stop the refresher and, with `rebuild_final_index`, re-embed the corpus with the final
        document tower. The embedding is sharded over the ranks and gathered with collectives, so it must run on all
        of them (the main process alone in `save_model` would wait forever for the others: gloo "Connection closed
        by peer" once they exit)."""
        if self.refresher is not None:
            self.refresher.close()  # a build still running embeds older weights: stop it, it would only compete
        stale = [self.index.fingerprint != whole_fingerprint(self.accelerator, self.retriever.document_embedder)]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(stale)  # one decision for all ranks, whatever each computed
        if stale[0] and self.pretraining_args.rebuild_final_index:
            self._rebuild_with_final_tower()
        elif isinstance(self.index, ShardedRealmIndex):
            self.index = self.index.gather()  # the final index is saved whole, by the main process

    def _rebuild_with_final_tower(self) -> None:
        logger.info(
            "Rebuilding the index with the final document tower (step %d; the last refreshed index is of step %s)",
            self.step, self.index.step,
        )
        self.index = self._build_index_now(step=self.step, whole=True)

    def _finalize_index(self, directory: str) -> None:
        """Make `self.index` the index of the final document tower (or warn that the saved one is stale).

        The index in use is the last *refreshed* one, built from a snapshot taken up to a refresh period (plus a
        build time) before the end: its manifest fingerprint names older doc-tower weights than `retriever/` holds,
        and `realm_hf.hub.publish` / evaluation refuse such a pair.
        """
        final_fingerprint = fingerprint_module(self.retriever.document_embedder)
        if self.index.fingerprint == final_fingerprint:
            return
        if self.pretraining_args.rebuild_final_index:
            self._rebuild_with_final_tower()
            return
        corpus = self.corpus_args
        max_articles = f" --max-articles {corpus.max_articles}" if corpus.max_articles is not None else ""
        logger.warning(
            "rebuild_final_index=False: %s holds the index of step %s, built by older document-tower weights than the "
            "saved retriever (step %d). It is stale: its fingerprint does not match the model, so realm_hf.hub.publish "
            "and evaluation refuse it. Rebuild it with: realm-hf build-index --corpus %s%s --model %s --output %s "
            "--block-length %d --index-type %s",
            self.published_path(os.path.join(directory, "index")), self.index.step, self.step, corpus.corpus,
            max_articles, self.published_path(os.path.join(directory, "retriever")),
            self.published_path(os.path.join(directory, "index")), corpus.block_length,
            corpus.index_type,
        )
