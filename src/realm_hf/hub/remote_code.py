"""Opt-in `trust_remote_code` loading of a saved REALM model: a thin module file and an `auto_map` in its config."""

from __future__ import annotations

import json
import os


__all__ = ["REMOTE_CODE_FILE", "add_remote_code"]

REMOTE_CODE_FILE = "realm_hf_remote.py"

_REMOTE_CODE = '''"""Entry point for `AutoModel.from_pretrained(<this repo>, trust_remote_code=True)`.

The model code is the `realm_hf` package (`pip install realm_hf`); this file only subclasses its classes so that
transformers can find them without `import realm_hf` (and so that saving keeps pointing here).
"""

import realm_hf


class {config}(realm_hf.{config}):
    pass


class {model}(realm_hf.{model}):
    config_class = {config}
'''


def add_remote_code(model_dir: str | os.PathLike) -> str:
    r"""
    Opt-in `trust_remote_code` support for a saved REALM model directory (before uploading it).

    Writes `realm_hf_remote.py` (thin subclasses of the `realm_hf` classes) and an `auto_map` in `config.json`, so
    `AutoModel.from_pretrained(repo, trust_remote_code=True)` works **without** `import realm_hf`. Requirements:
    the loading machine has `realm_hf` installed (transformers checks the imports of the file and names the missing
    package), and the user trusts the repo. Without `trust_remote_code`, `import realm_hf` then `AutoModel` keeps
    working as before. The code is not copied into the repo: transformers' `register_for_auto_class` would copy
    single module files, and REALM's models span several modules of the package.

    Args:
        model_dir (`str`): A directory with the `config.json` of a REALM model.

    Returns:
        `str`: the path of the written module file.
    """
    from ..modeling import RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever

    model_dir = os.fspath(model_dir)
    config_path = os.path.join(model_dir, "config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    classes = {
        cls.config_class.model_type: cls for cls in (RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever)
    }
    model_cls = classes.get(config.get("model_type"))
    if model_cls is None:
        raise ValueError(
            f"{config_path} has model_type={config.get('model_type')!r}, not a realm_hf model type {sorted(classes)}."
        )
    module = REMOTE_CODE_FILE[: -len(".py")]
    config_name, model_name = model_cls.config_class.__name__, model_cls.__name__
    path = os.path.join(model_dir, REMOTE_CODE_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(_REMOTE_CODE.format(config=config_name, model=model_name))
    config["auto_map"] = {"AutoConfig": f"{module}.{config_name}", "AutoModel": f"{module}.{model_name}"}
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    return path
