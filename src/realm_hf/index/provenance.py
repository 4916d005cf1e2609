"""Who wrote a faiss file: a keyed MAC in the manifest, made with a key only this user's realm_hf holds.

faiss's native reader trusts its input (a crafted `index.faiss` can make it allocate ~128 GiB, or worse), so a faiss
file is parsed only when this user's realm_hf wrote it, or the caller says it trusts the file
(`trust_index_file=True`). Where the folder lies says nothing about who wrote it (a `git clone` of a Hub repo, a copy
out of the Hugging Face cache, a colleague's folder on a shared disk are all "local"), so the writer is told apart by
a MAC: when realm_hf writes an index it records, in `manifest.json`, `index_file_mac` = HMAC-SHA256 over the bytes of
`index.faiss` under a per-user key. On load the MAC is recomputed with this user's key; a file another user (or
nobody) signed is rebuilt from `embeddings.npy` instead (plain numbers read with `allow_pickle=False`).

The MAC covers the file's bytes, not its xxh3 checksum: xxh3 detects damage, not tampering (a file can be crafted
to match a given xxh3 value), and the key must vouch for exactly the bytes faiss will parse.

The key: 32 random bytes in `<cache>/index-key`, created `0o600` on the first save, where `<cache>` is
`$REALM_HF_CACHE` when set, else `$XDG_CACHE_HOME/realm_hf`, else `~/.cache/realm_hf`. A key file that another user
owns or could read is not used (nothing it signs can be told from a forgery).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat

logger = logging.getLogger(__name__)

__all__ = ["CACHE_ENV", "KEY_FILE", "MAC_ALGORITHM", "file_mac", "key_path", "sign_index_file", "verify_index_file"]

CACHE_ENV = "REALM_HF_CACHE"
"""Environment variable naming realm_hf's per-user cache folder (where the key lives); tests point it elsewhere."""
KEY_FILE = "index-key"
MAC_ALGORITHM = "hmac-sha256"
_KEY_BYTES = 32
_DOMAIN = b"realm_hf index.faiss v1\0"  # the key signs faiss files only
_CHUNK = 16 * 1024 * 1024


def cache_directory() -> str:
    """realm_hf's per-user cache folder: `$REALM_HF_CACHE`, else `$XDG_CACHE_HOME/realm_hf`, else
    `~/.cache/realm_hf`."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return os.path.abspath(os.path.expanduser(override))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "realm_hf")


def key_path() -> str:
    """The file of this user's key (see the module docstring)."""
    return os.path.join(cache_directory(), KEY_FILE)


class UnusableKeyError(ValueError):
    """This user's key file cannot be used; the message is one line naming it and the fix."""


def _read_key(path: str) -> bytes | None:
    """The key in `path`, None when there is none; refuses a key file that is not this user's alone."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    getuid = getattr(os, "getuid", None)
    if not stat.S_ISREG(info.st_mode):
        raise UnusableKeyError(
            f"{path} (realm_hf's index key) is not a regular file; delete it (a new key is made on the next save)."
        )
    if getuid is not None and (info.st_uid != getuid() or info.st_mode & 0o077):
        raise UnusableKeyError(
            f"{path} (realm_hf's index key) is owned by uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):o}: "
            f"it must be yours alone; run `chmod 600 {path}` if it is yours, or delete it (a new key is made on the "
            "next save; indexes saved with the old one are rebuilt from their embeddings on load)."
        )
    with open(path, "rb") as f:
        key = f.read(_KEY_BYTES + 1)
    if len(key) != _KEY_BYTES:
        raise UnusableKeyError(
            f"{path} (realm_hf's index key) holds {len(key)} bytes, not {_KEY_BYTES}; delete it (a new key is made on "
            "the next save; indexes saved with the old one are rebuilt from their embeddings on load)."
        )
    return key


def _create_key(path: str) -> bytes:
    """Make this user's key at `path` (0o600), or read the one another process made first."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = os.path.join(folder, f".{KEY_FILE}.tmp-{secrets.token_hex(8)}")
    try:
        _write_new_key(tmp)
        try:
            os.link(tmp, path)  # whole or not at all, and never over a key another process made meanwhile
        except FileExistsError:
            pass  # another process made it first: use that one
        except OSError:  # a filesystem without hard links
            with contextlib.suppress(FileExistsError):
                _write_new_key(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    key = _read_key(path)
    if key is None:
        raise FileNotFoundError(f"could not create {path}")
    logger.info("Created realm_hf's index key %s (it marks the faiss files this user's realm_hf writes)", path)
    return key


def _write_new_key(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(_KEY_BYTES))
        f.flush()
        os.fsync(f.fileno())


def file_mac(path: str | os.PathLike, key: bytes) -> str:
    r"""
    `"hmac-sha256:<hex>"` over the bytes of the file at `path` under `key`.

    Args:
        path (`str` or `os.PathLike`): The faiss file.
        key (`bytes`): The key.
    """
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            mac.update(chunk)
    return f"{MAC_ALGORITHM}:{mac.hexdigest()}"


def sign_index_file(path: str | os.PathLike) -> str | None:
    r"""
    The MAC to record for the faiss file at `path`, made with this user's key (created on first use). None, with a
    warning saying what it costs, when the key cannot be made or read (the index then loads by rebuilding its search
    structure).

    Args:
        path (`str` or `os.PathLike`): The faiss file just written.
    """
    where = key_path()
    try:
        key = _read_key(where) or _create_key(where)
    except (OSError, UnusableKeyError) as error:
        logger.warning(
            "Not recording who wrote %s (%s): loading it will rebuild its search structure from the embeddings unless "
            "trust_index_file=True; set %s to a folder of your own to keep realm_hf's key there.",
            path, " ".join(str(error).split()), CACHE_ENV,
        )
        return None
    return file_mac(path, key)


def verify_index_file(path: str | os.PathLike, recorded: object) -> str | None:
    r"""
    Whether this user's realm_hf wrote the faiss file at `path`: None when `recorded` (the manifest's
    `index_file_mac`) is its MAC under this user's key, else the reason it is not (for the log line of a rebuild).

    Args:
        path (`str` or `os.PathLike`): The faiss file (checked against the manifest's checksum already).
        recorded (`object`): What the manifest records (anything: the manifest may have been edited).
    """
    if recorded is None:
        return (
            "its manifest records no index_file_mac (written by a realm_hf that did not record who wrote it, "
            "or a Hub bundle)"
        )
    if not isinstance(recorded, str) or not recorded.startswith(f"{MAC_ALGORITHM}:"):
        return f"its manifest's index_file_mac {str(recorded)[:40]!r} is not an {MAC_ALGORITHM} value"
    where = key_path()
    try:
        key = _read_key(where)
    except (OSError, UnusableKeyError) as error:
        return " ".join(str(error).split())
    if key is None:
        return f"this user's realm_hf has no key yet ({where}), so it wrote no index"
    if not hmac.compare_digest(file_mac(path, key), recorded):
        return f"it was not written by this user's realm_hf (its index_file_mac does not verify with {where})"
    return None
