"""Hub publishing and loading: index bundles as dataset repos, model/index pairing, model cards from templates.

Models need nothing special: they are `PreTrainedModel`s, so `save_pretrained` / `push_to_hub` / `from_pretrained`
work as for any transformers model, and `AutoModel.from_pretrained(dir_or_repo)` resolves our model types once
`realm_hf` is imported (see `realm_hf/__init__.py`). [`add_remote_code`] is the opt-in alternative for users who
load with `trust_remote_code=True` instead of importing `realm_hf` (the package must still be installed).

The corpus index is data, so it goes to a *dataset* repo, in one commit (the files: `realm_hf.hub.bundles`).

One module a responsibility:

- `bundles`: the files of an index bundle, writing them ([`write_index_bundle`]) and checking a download;
- `download`: repo id or path ([`is_repo_id`]), the local snapshot of a bundle ([`resolve_index_dir`]);
- `upload`: [`push_index_to_hub`] and the one-commit upload it shares with `publish`;
- `pairing`: which index goes with which model ([`check_index_matches_model`], [`record_index_pairing`]);
- `cards`: model and dataset cards from templates ([`render_model_card`], [`load_eval_results`]);
- `training_facts`: what the trainers wrote, for the cards ([`collect_training_facts`]);
- `conversion_facts`: what `realm-hf convert` recorded of a converted folder's source (`conversion.json`), for the
  cards ([`read_conversion_facts`]);
- `remote_code`: opt-in `trust_remote_code` loading ([`add_remote_code`]);
- `publish`: a saved model and its index to the Hub ([`publish`], what `realm-hf publish` runs).
"""

from __future__ import annotations

from .bundles import check_index_bundle, index_bundle_patterns, write_index_bundle
from .conversion_facts import CONVERSION_FILE, read_conversion_facts
from .cards import CARD_KINDS, TEMPLATES_DIR, load_eval_results, render_model_card
from .download import hub_offline, is_repo_id, resolve_index_dir
from .pairing import check_index_matches_model, expected_index_fingerprint, record_index_pairing
from .publish import PublishResult, publish
from .remote_code import add_remote_code
from .training_facts import collect_training_facts
from .upload import push_index_to_hub


__all__ = [
    "CARD_KINDS",
    "CONVERSION_FILE",
    "PublishResult",
    "TEMPLATES_DIR",
    "add_remote_code",
    "check_index_bundle",
    "check_index_matches_model",
    "collect_training_facts",
    "expected_index_fingerprint",
    "hub_offline",
    "index_bundle_patterns",
    "is_repo_id",
    "load_eval_results",
    "publish",
    "push_index_to_hub",
    "read_conversion_facts",
    "record_index_pairing",
    "render_model_card",
    "resolve_index_dir",
    "write_index_bundle",
]
