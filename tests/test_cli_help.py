"""`realm-hf --help` texts, the README's job commands, and the one-way arrow from the applications (`cli`, `demo`) to
the library."""

from __future__ import annotations

import ast
import os
import re

import pytest

import realm_hf
from realm_hf.cli import main
from realm_hf.cli.training import TRAINING_COMMANDS
from realm_hf.training.entry_points import NEGATED_HELP

SRC = os.path.dirname(os.path.abspath(realm_hf.__file__))
JOB_SCRIPTS = {"ict": "ict.py", "mlm": "mlm.py", "pretrain": "pretrain.py", "finetune": "finetune_openqa.py",
               "evaluate": "evaluate_openqa.py"}


APPLICATIONS = ("cli", "demo")


def _imported_modules(path: str, package: str) -> set[str]:
    """Top-level package modules (`realm_hf.<name>`) that a source file of `realm_hf.<package>` imports, at any depth."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".") if package else []
            parts = base[: len(base) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            names.update(parts[:1] or [alias.name for alias in node.names])  # `from .. import x` at the top: x
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("realm_hf."):
            names.add(node.module.split(".")[1])
    return names


def test_the_library_does_not_import_the_applications():
    """`cli` and `demo` are built on the library; no library module imports them."""
    offenders = []
    for folder, _, files in os.walk(SRC):
        package = os.path.relpath(folder, SRC).replace(os.sep, ".").strip(".")
        if package.split(".")[0] in APPLICATIONS:
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                if _imported_modules(path, package) & set(APPLICATIONS):
                    offenders.append(os.path.relpath(path, SRC))
    assert offenders == []
    assert "demo" in _imported_modules(os.path.join(SRC, "cli", "demo.py"), "cli")


def _subparser(name: str):
    import argparse

    from realm_hf.cli import build_parser

    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return subparsers.choices[name]


@pytest.mark.parametrize("command", ["build-index", "search", "ask"])
def test_every_option_has_help(command):
    missing = [action.dest for action in _subparser(command)._actions if not action.help]
    assert missing == []


@pytest.mark.parametrize("command", sorted(TRAINING_COMMANDS))
def test_every_training_command_prints_its_help(command, capsys):
    # argparse expands `%` in help texts: a bare one ("15%") broke `--help` with "incomplete format"
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and out.startswith(f"usage: realm-hf {command}") and "--help" in out


@pytest.mark.parametrize(
    "command, switch",
    [("pretrain", "share_towers"), ("pretrain", "use_null_document"), ("pretrain", "rebuild_final_index"),
     ("evaluate", "check_fingerprint"), ("finetune", "check_index_fingerprint"), ("finetune", "untie_towers"),
     ("ict", "share_towers")],
)
def test_negated_switches_have_their_own_help(command, switch, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    positive = re.search(rf"--{switch} \[\S+\], --{switch.replace('_', '-')} \[\S+\] (.+?) --", out).group(1)
    negated = re.search(rf"--no_{switch}, --no-{switch.replace('_', '-')} (.+?)(?: --|$)", out).group(1)
    assert negated == NEGATED_HELP[switch] and negated != positive


def test_the_readme_names_the_job_scripts_that_exist():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "examples/<job>.py" not in readme
    scripts = set(re.findall(r"examples/([\w-]+\.py)", readme))
    assert scripts >= {"pretrain.py", "ict.py", "finetune_openqa.py", "evaluate_openqa.py"}
    assert [s for s in scripts if not os.path.isfile(os.path.join(root, "examples", s))] == []
    for job, script in JOB_SCRIPTS.items():  # the README's job -> script table
        assert f"{job} -> examples/{script}" in " ".join(readme.replace("#", " ").split())


def test_the_top_level_help_describes_each_demo_with_its_own_options():
    """`realm-hf --help` listed the Wikipedia demo's options and steps for the default demo (the knowledge demo): each
    `realm-hf demo` line names options of the recipe it describes, and the folders that demo writes."""
    import argparse

    from realm_hf.cli import __doc__ as top_help
    from realm_hf.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    groups = {group.title: {o for a in group._group_actions for o in a.option_strings}
              for group in subparsers.choices["demo"]._action_groups}
    lines = [line.strip() for line in top_help.splitlines() if line.strip().startswith("realm-hf demo")]
    assert len(lines) == 3, lines
    for line in lines:
        recipe = "wikipedia-qa" if "--recipe wikipedia-qa" in line else "knowledge"
        options = set(re.findall(r"--[a-z-]+", line)) - {"--recipe", "--output"}
        assert options and options <= groups[f"--recipe {recipe}"], (line, groups)
    assert "outputs/demo/realm/final" in top_help and "outputs/demo-wikipedia-qa/openqa/final" in top_help
    assert "outputs/demo/openqa" not in top_help  # no demo writes it
