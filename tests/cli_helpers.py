"""Running `realm-hf` the way a user types it: a new process of the console script `pip install` made (offline)."""

from __future__ import annotations

import os
import subprocess
import sys

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
"""The environment of the commands: this one's (PYTHONPATH included), offline."""


def realm_hf_argv(*args: str) -> list[str]:
    """The command line of `realm-hf ARGS`: the console script next to this interpreter, else `python -m`."""
    script = os.path.join(os.path.dirname(sys.executable), "realm-hf")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "realm_hf.cli"]
    return [*command, *args]


def realm_hf_command(*args: str, cwd: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`realm-hf ARGS` in a new process; its exit status, stdout and stderr."""
    return subprocess.run(realm_hf_argv(*args), capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout)
