"""Shared fixtures: where the repository's compiled programs are."""

import pathlib
import platform

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = ROOT / "fixtures" / "models"
CPU_DEVICES = ["local-sync", "local-task"]
# On AArch64 the CPU programs are the fixtures' AArch64 builds (fixtures/models/arm_64), whose
# outputs match IREE's x86-64 ones as numbers rather than as text; compiles target the
# architecture's baseline CPU instead of x86-64-v2.
ARM64 = platform.machine().lower() in ("aarch64", "arm64")
PORTABLE_CHIP = "generic" if ARM64 else "x86-64-v2"


def cpu_module(name: str) -> pathlib.Path:
    """This machine's build of the CPU model fixture `name` (`tiny_add.vmfb`)."""
    arm = MODELS / "arm_64" / name
    return arm if ARM64 and arm.exists() else MODELS / name


@pytest.fixture(scope="session")
def models() -> pathlib.Path:
    return MODELS
