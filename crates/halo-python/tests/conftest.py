"""Shared fixtures: where the repository's compiled programs are."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = ROOT / "fixtures" / "models"
CPU_DEVICES = ["local-sync", "local-task"]


@pytest.fixture(scope="session")
def models() -> pathlib.Path:
    return MODELS
