"""The extras in setup.cfg: the engines that drive training are held to the versions the tests ran with."""

from __future__ import annotations

import configparser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

SETUP_CFG = Path(__file__).resolve().parents[1] / "setup.cfg"


def _extras() -> dict[str, list[Requirement]]:
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG, encoding="utf-8")
    section = parser["options.extras_require"]
    return {name: [Requirement(line) for line in section[name].splitlines() if line.strip()] for name in section}


def test_deepspeed_is_given_a_tested_range_in_every_extra():
    found = [req for requirements in _extras().values() for req in requirements if req.name == "deepspeed"]
    assert found, "no extra installs deepspeed"
    for requirement in found:
        operators = {spec.operator for spec in requirement.specifier}
        assert ">=" in operators and "<" in operators, f"{requirement} needs a lower and an upper bound"
    try:
        installed = metadata.version("deepspeed")
    except metadata.PackageNotFoundError:
        pytest.skip("deepspeed is not installed: the range cannot be compared with the tested version")
    assert all(requirement.specifier.contains(installed) for requirement in found), (installed, found)
