"""Finding a checkpoint's parts: the encoder, the retriever, the tokenizer and the corpus index of a REALM checkpoint,
in a local folder, a subfolder or a Hub repo, and the index a model names in its config.

This room sits below `realm_hf.pipelines` and `realm_hf.training` and above `realm_hf.modeling`, `realm_hf.index` and
`realm_hf.hub`: the pipelines, the index builder, evaluation, the CLI and `convert` all find parts here, so that they
always read the same files. `realm_hf.modeling.checkpoint_layout` keeps the layout itself (the folder names and which
folder a model class reads), which `from_pretrained` needs below this room.

- [`folders`]: what a folder holds, by its file names (no torch: the CLI checks its arguments with it).
- [`parts`]: the parts of a pre-training checkpoint (`retriever/`, `encoder/`, `index/`, tokenizer files).
- [`index_location`]: the one resolver of a model's index (`<model dir>/index`, `config.index_repo_id`).

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "folders": [
            "PRETRAINING_PARTS", "has_tokenizer_files", "holds_model", "is_pretraining_checkpoint", "model_around_index",
            "pretraining_checkpoint_part",
        ],
        "index_location": [
            "DEFAULT_INDEX_FOLDER", "FINGERPRINT_OPT_OUT", "IndexLocation", "check_index_fingerprint", "index_source",
            "load_index_for_model", "model_revision", "resolve_model_dir", "resolve_model_index",
        ],
        "parts": [
            "FILL_MASK_TASK", "CheckpointSource", "PretrainingParts", "checkpoint_source", "encoder_subfolder",
            "find_index", "find_retriever", "find_tokenizer", "load_encoder", "load_pretraining_parts",
            "load_tokenizer_from",
        ],
    },
)
