"""The workload suite `spectui bench` runs: prompts written for it, grouped by category.

Stdlib only, so listing or filtering workloads never pays for importing torch.
Speculative decoding wins or loses by how predictable the reply is, so each category
is written to make one kind of reply show: rigid formats (json, sql, code), text that
copies its prompt (summarize, retrieval), and open sampling (creative, math).

The conversations suite is chats: a fixed script of user turns in which a later turn
revises an earlier reply (code edited, a schema grown, a document asked about again). The
model's own greedy replies fill the turns between (spectui.bench.conversations writes
them before a run); the last turns are the cases. One chat has a file attached the way the
chat's `/file` attaches it (spectui.core.attachments): a code edit and a summary of it, the
replies that copy what the model has seen, which suffix decoding and prompt lookup draft from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from spectui.core.attachments import Attachment, message_with, read_attachment
from spectui.core.events import Message

CATEGORIES: tuple[str, ...] = (
    "json",
    "sql",
    "code-python",
    "code-typescript",
    "code-go",
    "factual",
    "summarize",
    "retrieval",
    "creative",
    "math",
)

# Multi-turn chats whose later replies revise earlier ones (the conversations suite).
CONVERSATION_CATEGORIES: tuple[str, ...] = (
    "chat-code-python",
    "chat-code-typescript",
    "chat-code-go",
    "chat-json-schema",
    "chat-document",
    "chat-attached-file",
)
ALL_CATEGORIES = CATEGORIES + CONVERSATION_CATEGORIES

SUITES: tuple[str, ...] = ("quick", "full", "conversations")

# Reply budgets sized for a small draft/target pair: long enough for acceptance rates to
# settle, short enough that a full suite stays a few minutes. The benchmark may override.
SHORT_MAX_TOKENS = 96
LONG_MAX_TOKENS = 128

GREEDY_TEMPERATURE = 0.0
CREATIVE_TEMPERATURE = 1.0
# Sampled, but cooler than creative: reasoning should stay on track while still
# exercising the rejection-sampling path.
MATH_TEMPERATURE = 0.7

TEMPERATURE_BY_CATEGORY: dict[str, float] = {
    category: GREEDY_TEMPERATURE for category in CATEGORIES
} | {"creative": CREATIVE_TEMPERATURE, "math": MATH_TEMPERATURE}

MAX_TOKENS_BY_CATEGORY: dict[str, int] = {
    category: SHORT_MAX_TOKENS for category in CATEGORIES
} | {"creative": LONG_MAX_TOKENS, "math": LONG_MAX_TOKENS}

# Seeds are spaced per category so adding a prompt to one category never shifts another's.
_SEED_BASE = 1000
_SEED_STRIDE_PER_CATEGORY = 100


@dataclass(frozen=True)
class Workload:
    category: str
    name: str
    messages: tuple[dict, ...]
    temperature: float
    max_tokens: int
    seed: int

    def __post_init__(self) -> None:
        if self.category not in ALL_CATEGORIES:
            raise ValueError(f"unknown category {self.category!r}; valid: {', '.join(ALL_CATEGORIES)}")

    @property
    def replies_pending(self) -> bool:
        """A conversation whose earlier replies the model has not written yet (None)."""
        return any(message["content"] is None for message in self.messages)

    def as_messages(self) -> list[Message]:
        if self.replies_pending:
            raise ValueError(f"{self.name}: the model's earlier replies are not written yet (spectui.bench.conversations)")
        # The dicts inside a frozen dataclass are still mutable; callers get their own.
        return [Message(**message) for message in self.messages]


def _fenced(passage: str) -> str:
    """A passage set off by lines of triple quotes, so the model (and the tests) can tell it from the task."""
    return f'"""\n{passage.strip()}\n"""'


# A system message only where the reply format matters: it keeps a small model from
# wrapping structured output in prose, which would hide the category's character.
_SYSTEM_BY_CATEGORY: dict[str, str] = {
    "json": "You are a data formatting tool. Reply with valid JSON only: no prose, no code fences.",
    "sql": "You are a database assistant. Reply with SQL only, in one fenced code block.",
    "code-python": "You are a coding assistant. Reply with Python code only, in one fenced code block.",
    "code-typescript": "You are a coding assistant. Reply with TypeScript code only, in one fenced code block.",
    "code-go": "You are a coding assistant. Reply with Go code only, in one fenced code block.",
}

_SHOP_SCHEMA = """\
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT NOT NULL,
    created_at DATE NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    status TEXT NOT NULL,  -- 'pending', 'paid' or 'refunded'
    total NUMERIC(10, 2) NOT NULL,
    ordered_at TIMESTAMP NOT NULL
);"""

_STAFF_SCHEMA = """\
CREATE TABLE departments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE employees (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments(id),
    manager_id INTEGER REFERENCES employees(id),
    salary NUMERIC(10, 2) NOT NULL,
    hired_on DATE NOT NULL
);"""

_CATALOG_SCHEMA = """\
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    price NUMERIC(10, 2) NOT NULL
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL,
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    PRIMARY KEY (order_id, product_id)
);"""

_CHANGELOG = """\
Tern 2.4.0 release notes.
This release focuses on faster sync and safer defaults. The sync engine now batches
file uploads into groups of up to 64 files, which cuts the time to sync a fresh
checkout by roughly forty percent on slow networks. Conflict detection has been
rewritten: Tern now compares content hashes instead of modification times, so
touching a file without changing it no longer creates a false conflict.
Safer defaults: new projects now enable end-to-end encryption by default, and the
--insecure flag has been removed. Projects created with earlier versions keep their
current setting until an owner runs tern encrypt enable.
The command line gains two commands. tern status --watch refreshes the status view
every two seconds until interrupted, and tern prune removes local snapshots older
than the retention period, which defaults to thirty days.
Deprecations: the tern.yml key sync_interval is deprecated in favour of
sync.interval_seconds and will be removed in Tern 3.0. Tern prints a warning when
it reads the old key.
Fixed bugs: uploads no longer stall when a file is renamed during sync, the progress
bar no longer jumps backwards after a retry, and tern login now honours the
HTTPS_PROXY environment variable."""

_POSTMORTEM = """\
Incident report: checkout outage on 14 March.
Between 09:12 and 09:58 UTC, about eighteen percent of checkout requests failed with
a 503 error. The cause was a configuration change to the payment gateway client that
lowered its connection pool from 200 connections to 20. The change was meant for the
staging environment but was applied to production because both environments read the
same configuration file.
When morning traffic rose, requests queued behind the smaller pool and timed out
after five seconds. The load balancer marked the slow instances as unhealthy and
removed them, which pushed more traffic onto the remaining instances and made the
queueing worse.
The on-call engineer was paged at 09:20 by the checkout error-rate alert. The team
first suspected the payment provider and spent twenty minutes checking its status
page. At 09:47 a diff of recent configuration changes showed the pool size change,
and rolling it back restored normal error rates by 09:58.
Follow-up actions: split the staging and production configuration files, add a
review requirement for changes to connection pool sizes, and add an alert on
connection pool wait time so that queueing is visible before requests fail."""

_CACHE_NOTE = """\
Design note: caching rendered dashboards.
Rendering a dashboard currently takes between two and six seconds because every
panel runs its query against the warehouse on each page load. Most dashboards are
opened many times a day, but their underlying data changes only when the hourly
import job finishes.
We propose to cache each rendered panel in Redis, keyed by the panel id, the query
text and the id of the last completed import. Because the import id is part of the
key, a finished import makes every old entry unreachable, and no explicit
invalidation is needed. Entries expire after twenty-four hours so that unreachable
entries do not fill the cache.
Panels that use the "live" data source bypass the cache entirely, since their data
changes every minute. Users can also force a fresh render with the refresh button,
which skips the cache read but still writes the new result.
We expect the median dashboard load time to drop from about three seconds to under
half a second. The main risk is memory use: at current volumes the cache needs
about four gigabytes, so we will cap it at eight gigabytes with least-recently-used
eviction and review the cap after one month."""

_API_REFERENCE = """\
Ledger HTTP API reference, version 3.
All requests must send an Authorization header with a bearer token. Tokens come in
two kinds: user tokens and admin tokens.
GET /v3/accounts - Lists the accounts visible to the caller. Requires a user token.
Supports the query parameters limit (default 50, maximum 500) and cursor.
POST /v3/accounts - Creates an account. Requires an admin token. The body must
include name and currency; currency is a three-letter ISO 4217 code.
GET /v3/accounts/{id}/balance - Returns the current balance as a decimal string.
Requires a user token.
POST /v3/transfers - Moves money between two accounts. Requires a user token. The
body must include from_account, to_account and amount. Send an Idempotency-Key
header to make retries safe; the same key within 24 hours returns the first result.
DELETE /v3/accounts/{id} - Closes an account. Requires an admin token. Fails with
409 Conflict if the balance is not zero.
GET /v3/audit-log - Returns audit events, newest first. Requires an admin token.
Supports the query parameters since (an RFC 3339 timestamp) and limit.
Rate limits: user tokens may make 100 requests per minute and admin tokens 20
requests per minute. Requests over the limit fail with 429 Too Many Requests and a
Retry-After header giving the number of seconds to wait."""

_FAQ = """\
Frequently asked questions: Nimbus Cloud Storage.
How much storage do I get for free? Every account includes 15 GB of free storage,
shared between files, photos and backups.
What happens when I go over my limit? You can still download and delete files, but
new uploads are paused until you free up space or upgrade your plan.
How do I upgrade? Open Settings, choose Plan, and pick the Plus plan (200 GB for
$2.99 a month) or the Pro plan (2 TB for $9.99 a month). The new limit applies
immediately.
Can I get a refund? Monthly plans can be refunded within 14 days of the first
payment. Annual plans can be refunded within 30 days of purchase. Refunds are not
available for renewals.
How long are deleted files kept? Deleted files stay in the Trash for 30 days on the
free plan and 90 days on paid plans, after which they are removed permanently.
Are my files encrypted? Files are encrypted in transit with TLS 1.3 and at rest with
AES-256. Pro plans can also enable client-side encryption, in which case Nimbus
cannot recover your files if you lose your key.
How do I cancel? Open Settings, choose Plan, and select Cancel plan. Your files stay
available until the end of the current billing period."""

_CONFIG_FILE = """\
# worker.toml: configuration for the Orca background job worker.

[queue]
# Address of the Redis server that holds the job queue.
url = "redis://localhost:6379/0"
# Names of the queues to read from, in priority order.
names = ["critical", "default", "low"]

[workers]
# Number of worker processes. Each process holds its own copy of loaded models,
# so memory use grows linearly with this value.
processes = 4
# Jobs each process runs at the same time. Raise for I/O-bound jobs.
concurrency = 8
# Restart a process after it has run this many jobs, which returns leaked memory.
max_jobs_per_process = 500

[jobs]
# Seconds before a running job is killed and marked as failed.
timeout_seconds = 300
# How many times a failed job is retried before it moves to the dead-letter queue.
max_retries = 3
# Largest job payload accepted, in megabytes. Larger payloads are rejected on enqueue.
max_payload_mb = 16

[cache]
# In-memory result cache per process, in megabytes. Set to 0 to disable.
result_cache_mb = 256

[logging]
# One of debug, info, warning or error.
level = "info"
# Write logs as JSON lines instead of plain text.
json = true"""

_PROMPTS_BY_CATEGORY: dict[str, tuple[str, ...]] = {
    "json": (
        "Return only JSON: an array of objects with the keys \"id\" (integer), \"name\" (string), "
        "\"email\" (string) and \"active\" (boolean), one object per user below, ids starting at 1.\n"
        "- Ada Lovelace, ada@example.com, active\n"
        "- Alan Turing, alan@example.com, inactive\n"
        "- Grace Hopper, grace@example.com, active\n"
        "- Edsger Dijkstra, edsger@example.com, inactive",
        "Return only JSON matching this schema: {\"host\": string, \"port\": integer, "
        "\"tls\": {\"enabled\": boolean, \"cert_path\": string}, \"workers\": integer, "
        "\"log_level\": string, \"allowed_origins\": [string]}.\n"
        "Values: the server listens on api.internal.example port 8443 with TLS enabled, using the "
        "certificate at /etc/ssl/api.pem. It runs 6 workers, logs at level \"warning\", and allows "
        "requests from https://app.example.com and https://admin.example.com.",
        "Return only JSON: an object with the key \"items\", an array of objects with the keys "
        "\"sku\" (string), \"name\" (string), \"quantity\" (integer) and \"unit_price\" (number), "
        "and the key \"total\" (number, the sum of quantity times unit_price).\n"
        "Inventory: 3 of KB-101 Mechanical keyboard at 49.50; 5 of MS-220 Wireless mouse at 19.99; "
        "2 of HB-007 USB-C hub at 34.00.",
    ),
    "sql": (
        f"Schema:\n{_SHOP_SCHEMA}\n\n"
        "Write a SQL query that returns the 5 customers with the highest total spend on paid "
        "orders, with columns name, country and total_spent, highest first.",
        f"Schema:\n{_STAFF_SCHEMA}\n\n"
        "Write a SQL query that returns, for each department with more than 3 employees, the "
        "department name, the number of employees and the average salary rounded to 2 decimals, "
        "ordered by average salary descending.",
        f"Schema:\n{_CATALOG_SCHEMA}\n\n"
        "Write two SQL queries: first, the sku and name of every product that has never been "
        "ordered; second, the 3 products with the most units ordered, with sku, name and "
        "units_ordered.",
    ),
    "code-python": (
        "Write a Python function `def slugify(title: str) -> str` that lowercases the title, "
        "replaces every run of characters that are not ASCII letters or digits with a single "
        "hyphen, and strips leading and trailing hyphens. Include type hints and a one-line "
        "docstring. Code only.",
        "Write a Python function `def chunked(items: list[T], size: int) -> list[list[T]]` that "
        "splits items into consecutive lists of length size, the last one possibly shorter. It "
        "raises ValueError if size is less than 1. Use a TypeVar T. Code only.",
        "Write a Python function `def parse_duration(text: str) -> int` that converts strings "
        "such as \"1h30m\", \"45s\" or \"2h5m10s\" into a number of seconds. Units are h, m and s, "
        "each at most once and in that order; raise ValueError for anything else. Code only.",
    ),
    "code-typescript": (
        "Write a TypeScript function `debounce<T extends unknown[]>(fn: (...args: T) => void, "
        "waitMs: number): (...args: T) => void` that delays calling fn until waitMs milliseconds "
        "have passed since the last call, using the arguments of the last call. Code only.",
        "Write a TypeScript function `groupBy<T, K extends string>(items: T[], key: (item: T) => K): "
        "Record<K, T[]>` that groups items by the key each one maps to, keeping the original "
        "order within each group. Code only.",
        "Write a TypeScript function `parseQuery(query: string): Record<string, string>` that parses "
        "a URL query string such as \"?a=1&b=two%20words\" into an object. Strip a leading \"?\", "
        "decode keys and values with decodeURIComponent, and let later keys win. Code only.",
    ),
    "code-go": (
        "Write a Go function `func ReverseWords(s string) string` that returns the words of s in "
        "reverse order, separated by single spaces, ignoring leading, trailing and repeated "
        "whitespace. Use the strings package. Code only.",
        "Write a Go function `func WordCount(text string) map[string]int` that counts how often "
        "each word appears in text, case-insensitively, where words are separated by whitespace "
        "and surrounding punctuation is trimmed. Code only.",
        "Write a Go function `func Retry(attempts int, delay time.Duration, fn func() error) error` "
        "that calls fn until it returns nil or attempts calls have been made, sleeping delay "
        "between calls and doubling delay each time. Return the last error. Code only.",
    ),
    "factual": (
        "What is the boiling point of water at sea level in degrees Celsius and Fahrenheit, and "
        "why is it lower at high altitude? Answer in two sentences.",
        "Explain in two sentences what TCP's three-way handshake does.",
        "What is the difference between a process and a thread in an operating system? Answer in "
        "three sentences.",
        "What does the HTTP status code 404 mean, and how does it differ from 410? Answer in two "
        "sentences.",
    ),
    "summarize": (
        f"{_fenced(_CHANGELOG)}\n\n"
        "Summarize the release notes above in 3 bullet points, reusing their wording where possible.",
        f"{_fenced(_POSTMORTEM)}\n\n"
        "Summarize the incident report above in 3 bullet points: the cause, the impact and the "
        "follow-up actions. Reuse its wording where possible.",
        f"{_fenced(_CACHE_NOTE)}\n\n"
        "Summarize the design note above in 3 bullet points, reusing its wording where possible.",
    ),
    "retrieval": (
        f"{_fenced(_API_REFERENCE)}\n\n"
        "Using only the text above, list every endpoint that requires an admin token, quoting the "
        "exact lines that describe each one.",
        f"{_fenced(_FAQ)}\n\n"
        "Using only the text above, answer: can I get a refund, and how long are deleted files "
        "kept? Quote the exact sentences that answer each part.",
        f"{_fenced(_CONFIG_FILE)}\n\n"
        "Using only the configuration file above, list the settings that affect memory use, "
        "quoting the exact lines, each with its comment.",
    ),
    "creative": (
        "Write a short poem about a lighthouse keeper who receives a letter from the sea.",
        "Write the opening paragraph of a story set in a city where it has rained for a hundred "
        "years, told by a child who has never seen the sun.",
        "Invent a fable about a clockmaker and a fox, and end it with a surprising moral.",
    ),
    "math": (
        "A train leaves at 09:40 and travels 150 km at 90 km/h, then stops for 12 minutes, then "
        "travels another 80 km at 120 km/h. At what time does it arrive? Reason step by step, "
        "then give the final answer on its own line.",
        "A shop sells pens at 3 for $4 and notebooks at $2.50 each. Maya buys 12 pens and 7 "
        "notebooks and pays with a $50 bill. How much change does she get? Reason step by step, "
        "then give the final answer on its own line.",
        "A tank holds 600 litres. Pipe A fills it in 30 minutes and pipe B in 45 minutes, while a "
        "drain empties it in 90 minutes. Starting empty with all three open, how long until the "
        "tank is full? Reason step by step, then give the final answer on its own line.",
    ),
}


def _messages_for(category: str, prompt: str) -> tuple[dict, ...]:
    user = {"role": "user", "content": prompt}
    system_prompt = _SYSTEM_BY_CATEGORY.get(category)
    if system_prompt is None:
        return (user,)
    return ({"role": "system", "content": system_prompt}, user)


def _build_full_suite() -> tuple[Workload, ...]:
    workloads = []
    for category_index, category in enumerate(CATEGORIES):
        for prompt_index, prompt in enumerate(_PROMPTS_BY_CATEGORY[category]):
            workloads.append(
                Workload(
                    category=category,
                    name=f"{category}-{prompt_index + 1}",
                    messages=_messages_for(category, prompt),
                    temperature=TEMPERATURE_BY_CATEGORY[category],
                    max_tokens=MAX_TOKENS_BY_CATEGORY[category],
                    seed=_SEED_BASE + _SEED_STRIDE_PER_CATEGORY * category_index + prompt_index,
                )
            )
    return tuple(workloads)


_FULL_SUITE = _build_full_suite()


# ---------------------------------------------------------------- conversations

# Replies between the scripted turns: long enough to hold a whole function or schema, which
# the later turns then revise. The measured turns get the category budget.
CONVERSATION_REPLY_MAX_TOKENS = 256
CONVERSATION_MAX_TOKENS = 192
# An edit's reply is the whole module: 192 tokens stop inside its first functions, before the copying.
ATTACHED_FILE_MAX_TOKENS = 400
MEASURED_TURNS = 2  # the last two user turns of each script are cases
_CONVERSATION_SEED_BASE = 3000

_SCRIPTS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    # category: (system prompt, user turns)
    "chat-code-python": (
        _SYSTEM_BY_CATEGORY["code-python"],
        (
            "Write a Python function `is_palindrome(text: str) -> bool` that ignores case and every "
            "character that is not a letter or a digit.",
            "Now make it also ignore accents, so that \"Esope reste ici et se repose\" written with "
            "accented letters still counts. Give the whole function again.",
            "Add a docstring with two doctest examples, and a `main()` that checks every line of "
            "standard input and prints yes or no. Give the whole program again.",
        ),
    ),
    "chat-code-typescript": (
        _SYSTEM_BY_CATEGORY["code-typescript"],
        (
            "Write a TypeScript function `parseCsvLine(line: string): string[]` that splits a CSV line "
            "on commas, where a field in double quotes may contain commas.",
            "Now also accept escaped quotes inside a quoted field (two double quotes stand for one). "
            "Give the whole function again.",
            "Rename it to `splitCsvLine`, add a `delimiter` parameter that defaults to a comma, and add "
            "a JSDoc comment. Give the whole function again.",
        ),
    ),
    "chat-code-go": (
        _SYSTEM_BY_CATEGORY["code-go"],
        (
            "Write a Go function `func Dedupe(items []string) []string` that removes duplicates and "
            "keeps the order of first occurrences.",
            "Make it generic over any comparable element type. Give the whole function again.",
            "Add a function `DedupeBy[T any, K comparable](items []T, key func(T) K) []T` in the same "
            "style, and give both functions.",
        ),
    ),
    "chat-json-schema": (
        _SYSTEM_BY_CATEGORY["json"],
        (
            "Write a JSON Schema (draft 2020-12) for a user object with the required properties id "
            "(integer), name (string) and email (string in the email format).",
            "Add an optional property roles: an array of strings, each one of admin, editor or viewer. "
            "Give the whole schema again.",
            "Add an optional address object with the required properties street, city and postal_code "
            "(all strings), and forbid additional properties everywhere. Give the whole schema again.",
        ),
    ),
    "chat-document": (
        None,
        (
            f"{_fenced(_API_REFERENCE)}\n\n"
            "Using only the reference above, list every endpoint that needs an admin token.",
            "What are the rate limits, exactly as the reference states them?",
            "Make a Markdown table of every endpoint with its method, its path and the token it "
            "needs, in the reference's order.",
        ),
    ),
}


# The file the first screen offers to edit (shipped in the package): attached as `/file` does.
ATTACHED_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "csv_tools.py"


def attached_example() -> Attachment:
    """The example file as the chat attaches it (its header, hash and fenced text)."""
    attached = read_attachment(ATTACHED_EXAMPLE.name, cwd=ATTACHED_EXAMPLE.parent)
    if isinstance(attached, str):  # the package is broken: its data file is missing
        raise RuntimeError(f"the bench's attached file: {attached}")
    return attached


def _attached_file_turns() -> tuple[str, ...]:
    """The file goes into the turn after its `/file` (the first), the follow-ups ask about it."""
    return (
        message_with([attached_example()], "What is this module for? Answer in two sentences."),
        "Add type hints to every function, keep everything else, reply with the whole module.",
        "Summarise the attached module: one line per function, with its name and what it returns.",
    )


def conversation_script(category: str) -> tuple[dict, ...]:
    """The whole chat of a category: its user turns with a None reply after each but the last."""
    system, turns = (None, _attached_file_turns()) if category == "chat-attached-file" else _SCRIPTS[category]
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    for index, turn in enumerate(turns):
        if index:
            messages.append({"role": "assistant", "content": None})
        messages.append({"role": "user", "content": turn})
    return tuple(messages)


def _build_conversations() -> tuple[Workload, ...]:
    workloads = []
    for category_index, category in enumerate(CONVERSATION_CATEGORIES):
        script = conversation_script(category)
        user_turns = [i for i, message in enumerate(script) if message["role"] == "user"]
        for turn in range(len(user_turns) - MEASURED_TURNS, len(user_turns)):
            workloads.append(Workload(
                category=category,
                name=f"{category}-turn{turn + 1}",
                messages=script[: user_turns[turn] + 1],
                temperature=GREEDY_TEMPERATURE,
                max_tokens=ATTACHED_FILE_MAX_TOKENS if category == "chat-attached-file" else CONVERSATION_MAX_TOKENS,
                seed=_CONVERSATION_SEED_BASE + _SEED_STRIDE_PER_CATEGORY * category_index + turn,
            ))
    return tuple(workloads)


_CONVERSATIONS = _build_conversations()


def by_category(workloads: Iterable[Workload]) -> dict[str, list[Workload]]:
    """Workloads grouped by category, categories in ALL_CATEGORIES order, only those present."""
    grouped: dict[str, list[Workload]] = {category: [] for category in ALL_CATEGORIES}
    for workload in workloads:
        grouped[workload.category].append(workload)
    return {category: cases for category, cases in grouped.items() if cases}


def suite(name: str) -> list[Workload]:
    """'quick': the first prompt of each category (10 cases); 'full': every prompt (at least 3 per
    category); 'conversations': the last two turns of each scripted chat (12 cases)."""
    if name == "full":
        return list(_FULL_SUITE)
    if name == "conversations":
        return list(_CONVERSATIONS)
    if name == "quick":
        return [cases[0] for cases in by_category(_FULL_SUITE).values()]
    raise ValueError(f"unknown suite {name!r}; valid suites: {', '.join(SUITES)}")
