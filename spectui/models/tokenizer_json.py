"""A tokenizer folder (tokenizer.json, tokenizer_config.json) read with `tokenizers` and jinja2.

The part of transformers' fast tokenizer that spectui's engines use — encode, decode, the
vocabulary, special ids, the chat template — without importing transformers (about a second
of every start on the ggml backend). tests/test_gguf_backend.py checks it gives the ids and
text transformers gives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from spectui.core.errors import ModelError, one_line

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")


class JsonTokenizer:
    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        try:
            self.backend_tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except Exception as error:  # OSError, JSON errors, and the tokenizers library's own
            raise ModelError(f"cannot read the tokenizer in {folder}: {one_line(error)}") from None
        self.chat_template: str | None = config.get("chat_template") if isinstance(config.get("chat_template"), str) else None
        self.clean_up_tokenization_spaces = bool(config.get("clean_up_tokenization_spaces", False))
        self.special_tokens = {key: _content(config.get(key)) for key in _SPECIAL_KEYS if _content(config.get(key))}
        self.added_tokens_decoder = self.backend_tokenizer.get_added_tokens_decoder()
        extra = [_content(token) for token in config.get("additional_special_tokens") or []]
        named = [*self.special_tokens.values(), *(token for token in extra if token)]
        self.all_special_ids = sorted({i for i in map(self.backend_tokenizer.token_to_id, named) if i is not None})
        eos = self.special_tokens.get("eos_token")
        self.eos_token_id = self.backend_tokenizer.token_to_id(eos) if eos else None
        self._template = None

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def __call__(self, text: str | list[str], add_special_tokens: bool = True) -> dict:
        if isinstance(text, list):
            encodings = self.backend_tokenizer.encode_batch(text, add_special_tokens=add_special_tokens)
            return {"input_ids": [encoding.ids for encoding in encodings]}
        return {"input_ids": self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str:
        text = self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces
        return _clean_up(text) if clean else text

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = False, tokenize: bool = False,
                            **variables: object) -> str:
        """The template rendered as transformers renders it (a sandboxed jinja2 with trimmed blocks);
        `variables` as transformers passes extra keyword arguments (enable_thinking)."""
        if tokenize:
            raise ValueError("apply_chat_template here renders text: tokenize it with the tokenizer")
        if self._template is None:
            self._template = _compiled(self.chat_template or "")
        return self._template.render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                     tools=None, documents=None, **(self.special_tokens | variables))


def _content(value: object) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _compiled(template: str):
    import datetime

    from jinja2 import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: object, ensure_ascii: bool = False, indent: int | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda format: datetime.datetime.now().strftime(format)
    return environment.from_string(template)


def _clean_up(text: str) -> str:
    """transformers' clean_up_tokenization (for tokenizers whose config asks for it)."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text
