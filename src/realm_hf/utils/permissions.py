"""File modes that honour the user's umask, so that what realm_hf writes can be shared as `save_pretrained` and
`datasets` files can: a folder gets `0o777 & ~umask`, a file `0o666 & ~umask` (`drwxr-xr-x` / `-rw-r--r--` under
the usual umask 022, `drwx------` / `-rw-------` under 077).

Some writers ignore the umask: `tempfile.mkdtemp` makes `0o700` folders, `tempfile.mkstemp` `0o600` files, and
safetensors >= 0.8 writes its files through a private temporary file (`0o600`). Every temporary tree realm_hf
publishes (index saves, checkpoints, `final/`, converted folders) is passed through [`honour_umask`] before the rename
that makes it visible.
"""

from __future__ import annotations

import os
import stat
import threading

__all__ = ["current_umask", "directory_mode", "file_mode", "honour_umask"]

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    r"""
    The process's umask, read without changing it where the system can tell (`/proc/self/status`, Linux >= 4.7).

    Elsewhere it is set and put back at once (`os.umask` has no getter), under a lock so that the threads of
    realm_hf never see the brief change; other threads of the process could, in that instant.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def directory_mode() -> int:
    """The mode of a new folder under the current umask (`0o777 & ~umask`)."""
    return 0o777 & ~current_umask()


def file_mode(executable: bool = False) -> int:
    """The mode of a new file under the current umask (`0o666 & ~umask`; `0o777 & ~umask` when `executable`)."""
    return (0o777 if executable else 0o666) & ~current_umask()


def honour_umask(path: str | os.PathLike) -> None:
    r"""
    Give the file or the tree at `path` the modes the umask asks for: every folder `0o777 & ~umask`, every regular
    file `0o666 & ~umask` (with the execute bits it has, masked too).

    For a tree realm_hf has just written (a temporary folder about to be renamed into place). Symbolic links are
    neither followed nor changed, and a file with other hard links keeps its mode: it is shared with a folder
    realm_hf did not write here (e.g. the blocks of a corpus, hard-linked into an index), whose mode is not ours to
    change.

    Args:
        path (`str` or `os.PathLike`): A file or a folder.
    """
    path = os.fspath(path)
    mask = current_umask()
    if os.path.isdir(path) and not os.path.islink(path):
        for root, folders, files in os.walk(path):
            _set_mode(root, 0o777 & ~mask)
            for name in files:
                _set_file_mode(os.path.join(root, name), mask)
            folders[:] = [name for name in folders if not os.path.islink(os.path.join(root, name))]
    else:
        _set_file_mode(path, mask)


def _set_file_mode(path: str, mask: int) -> None:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        return
    _set_mode(path, (0o666 | (info.st_mode & 0o111)) & ~mask, info)


def _set_mode(path: str, mode: int, info: os.stat_result | None = None) -> None:
    info = info if info is not None else os.lstat(path)
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)
