"""Every module of the package imports: a name moved by one branch and still used by another
fails here, not in the middle of a user's run (bench's report once did, after its run)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import spectui

MODULES = sorted(info.name for info in pkgutil.walk_packages(spectui.__path__, "spectui."))


@pytest.mark.parametrize("name", MODULES)
def test_the_module_imports(name):
    importlib.import_module(name)
