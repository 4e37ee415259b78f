"""What a step costs on one machine for one target and backend: the profile a replay is charged at.

v(n): one loop step verifying n rows, in plain steps (v(1) = 1: a plain step, the loop's own
work included), measured at the conversations' length.
On ggml a T = 0 verify wider than the kernels compute exactly runs in pieces of `piece` rows
and stops at the piece of its first rejection (spectui.engines.speculative.loop's
verify_greedy_in_pieces): those pieces are what a step pays. A copy drafter's cost is per
drafting step (it looks up, it runs no model). The profile is JSON, so one measured elsewhere
(a GPU) can be charged here: acceptance at T = 0 does not depend on the hardware, only costs do.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spectui.core.errors import UsageError

# 2: v(n) and the plain step timed as the loop's steps (issue 57); a kept profile of another
# version is measured again (load_cached_profile), a --costs FILE is read as it is
PROFILE_VERSION = 2


@dataclass(frozen=True)
class CostProfile:
    model: str
    backend: str  # e.g. "ggml Q4_K_M · 2 threads"
    plain_seconds: float  # one plain decode step at context_tokens
    verify: dict[int, float]  # rows -> a decode of that many rows, in plain steps (1 -> 1.0)
    piece: int | None = None  # rows a T = 0 verify runs at a time (ggml); None: one decode, any width
    context_tokens: int = 0  # where v(n) was measured
    draft_seconds: dict[str, float] = field(default_factory=dict)  # copy drafter -> seconds per drafting step
    overhead_seconds: float = 0.0  # the loop's own time per step, outside drafting and verifying
    machine: str = ""
    # llama.cpp's own plain step on the same GGUF at context_tokens (its defaults, as the bench's
    # llamacpp arm runs): what "vs llama.cpp plain" divides by; None where it was not measured
    llamacpp_plain_seconds: float | None = None

    def rows_cost(self, rows: int) -> float:
        """A decode of `rows` rows in plain steps; past the widest measured, the line through the last two."""
        if rows in self.verify:
            return self.verify[rows]
        widest = max(self.verify)
        below = self.verify.get(widest - 1, 1.0)
        return self.verify[widest] + (rows - widest) * max(0.0, self.verify[widest] - below)

    def verify_steps(self, num_drafted: int, num_accepted: int) -> tuple[float, int | None]:
        """(plain steps, drafts the target ran rows for or None for all) of a T = 0 verify, as the
        loop runs it: whole when narrower than a piece, else piece by piece to the first rejection."""
        rows = num_drafted + 1
        if self.piece is None or num_drafted < self.piece:
            return self.rows_cost(rows), None
        cost, done = 0.0, 0
        while done < rows:
            width = min(self.piece, rows - done)
            cost += self.rows_cost(width)
            done += width
            if num_accepted < done:  # this piece held the first rejected draft (or the bonus row)
                break
        return cost, (done - 1 if done - 1 < num_drafted else None)

    def draft_cost(self, method: str) -> float:
        return self.draft_seconds.get(method, 0.0)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["verify"] = {str(rows): value for rows, value in sorted(self.verify.items())}
        return {"version": PROFILE_VERSION, **data}


def profile_from(data: object, where: str) -> CostProfile:
    """A profile from parsed JSON, every field checked: a bad one is one line naming it."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a cost profile is a JSON object")
    missing = [name for name in ("model", "backend", "plain_seconds", "verify") if name not in data]
    if missing:
        raise UsageError(f"{where}: the cost profile lacks {', '.join(missing)}")
    plain = _positive(data["plain_seconds"], where, "plain_seconds")
    verify = data["verify"]
    if not isinstance(verify, dict) or not verify:
        raise UsageError(f"{where}: verify must map rows to plain steps, e.g. {{\"1\": 1.0, \"2\": 1.6}}")
    try:
        rows_cost = {int(rows): _positive(value, where, f"verify[{rows}]") for rows, value in verify.items()}
    except ValueError:
        raise UsageError(f"{where}: verify's keys are row counts (1, 2, ...)") from None
    if 1 not in rows_cost or min(rows_cost) < 1:
        raise UsageError(f"{where}: verify needs the plain step's row, \"1\"")
    piece = data.get("piece")
    if piece is not None and (not isinstance(piece, int) or isinstance(piece, bool) or piece < 1):
        raise UsageError(f"{where}: piece must be a whole number of rows or null")
    drafts = data.get("draft_seconds", {})
    if not isinstance(drafts, dict):
        raise UsageError(f"{where}: draft_seconds must map a method to seconds")
    return CostProfile(
        model=str(data["model"]), backend=str(data["backend"]), plain_seconds=plain, verify=rows_cost, piece=piece,
        context_tokens=int(_number(data.get("context_tokens", 0), where, "context_tokens")),
        draft_seconds={str(method): _number(value, where, f"draft_seconds.{method}") for method, value in drafts.items()},
        overhead_seconds=_number(data.get("overhead_seconds", 0.0), where, "overhead_seconds"),
        machine=str(data.get("machine", "")),
        llamacpp_plain_seconds=_optional_positive(data.get("llamacpp_plain_seconds"), where, "llamacpp_plain_seconds"),
    )


def _number(value: object, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UsageError(f"{where}: {name} must be a number ≥ 0, got {json.dumps(value)}")
    return float(value)


def _positive(value: object, where: str, name: str) -> float:
    number = _number(value, where, name)
    if number <= 0:
        raise UsageError(f"{where}: {name} must be above 0")
    return number


def _optional_positive(value: object, where: str, name: str) -> float | None:
    return None if value is None else _positive(value, where, name)


def read_profile(path: Path) -> CostProfile:
    """--costs FILE: a profile written by --save-costs here or on another machine."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--costs {path}: {getattr(error, 'strerror', None) or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise UsageError(f"--costs {path}: not JSON ({error})") from None
    return profile_from(data, f"--costs {path}")


def profile_json(profile: CostProfile) -> str:
    return json.dumps(profile.as_dict(), indent=2) + "\n"


def cached_profile_path(data_dir: Path, model: str, backend: str) -> Path:
    """Where this machine's measured profile for model + backend is kept, beside the history."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in f"{model}-{backend}")
    return data_dir / "advise-costs" / f"{safe}.json"


def load_cached_profile(path: Path) -> CostProfile | None:
    """The kept profile, or None when there is none or it no longer reads (it is measured again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != PROFILE_VERSION:
            return None  # measured the way an older spectui measured: not this loop's costs
        return profile_from(data, str(path))
    except (OSError, ValueError, UsageError):
        return None
