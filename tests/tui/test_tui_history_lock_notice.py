"""The "History is locked" notice goes when the lock does (issue 59 item 8): it stayed up to
its 30 s timeout beside "History saved", saying a lock that was gone."""

from __future__ import annotations

import subprocess
import sys

from spectui.settings.config import ChatConfig
from spectui.store import Store
from spectui.tui.app import SpectuiApp
from spectui.tui.history_watch import LOCKED_NOTICE

from fake_engines import PlanEngine, factory_for
from test_tui_history_lock import HOLD
from tui_helpers import make_host, notices, ready, send, wait_for


async def test_the_locked_notice_is_taken_down_when_the_lock_frees(tmp_path):
    path = tmp_path / "history.sqlite3"
    store = Store(path, wait_for_lock=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        config = ChatConfig()
        app = SpectuiApp(make_host(factory_for(PlanEngine([None])), config), config, store,
                         screenshot_dir=tmp_path / "shots", export_dir=tmp_path / "shots", cursor_blink=False)
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            await send(pilot, "sent while locked")
            await wait_for(pilot, lambda: LOCKED_NOTICE in notices(app))
            holder.stdin.write("go\n")
            holder.stdin.flush()
            await wait_for(pilot, lambda: "History saved: the other spectui let go of it." in notices(app))
            assert LOCKED_NOTICE not in notices(app)
    finally:
        holder.communicate("", timeout=30)
    store.close()
