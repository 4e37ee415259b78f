import pytest

from tui_helpers import make_app_fixture


@pytest.fixture
def make_app(tmp_path):
    yield from make_app_fixture(tmp_path)
