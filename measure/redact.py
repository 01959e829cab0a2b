"""Keep secrets out of everything measure writes or prints, and terminal escapes out of what it prints.

Every sink goes through here: env.json (`redact_json`), profile.csv cells and the resume command
(`redact_text`, `redacted_argv`), stderr and log records (`redact_text` + `printable`).  Four channels
carry API keys in: `--api-key` flags (also inside a `--server-cmd` string), `--engine-arg` keys that
name a secret (`api_key=...`), user:password in a URL, and server error bodies that echo the
Authorization header.  The key the load generator sends is registered with `register_secret`, so its
literal value is removed wherever it shows up.
"""

from __future__ import annotations

import logging
import re
import shlex

MASK = "***"
# Flags whose value is a secret, on measure's command line and on a launched server's.
SECRET_FLAGS = ("--api-key", "--api_key", "--token", "--hf-token", "--password")
# Key names (engine args, JSON fields) whose value is a secret; `tokens` (counts) is not one.
_SECRET_NAME = r"(?:api[_-]?key|[_-]key|access[_-]?token|auth[_-]?token|hf[_-]?token|[_-]token|token|secret|password|passwd|credentials?|authorization)"
_SECRET_NAME_RE = re.compile(r"^[\w.-]*" + _SECRET_NAME + r"$", re.IGNORECASE)
# Registered literals shorter than this are not searched for (they would mask ordinary words).
MIN_SECRET_CHARS = 4
_FLAG_RE = re.compile(r"(?P<flag>(?:" + "|".join(re.escape(f) for f in SECRET_FLAGS) + r"))(?P<sep>[= ]+)"
                      r"(?P<value>\"[^\"]*\"|'[^']*'|\S+)", re.IGNORECASE)
_KEY_VALUE_RE = re.compile(r"(?P<key>\b[\w.-]*" + _SECRET_NAME + r")\b(?P<sep>\"?\s*[=:]\s*\"?)"
                           r"(?P<value>[^\s\"',;}&]+)", re.IGNORECASE)
# HTTP credentials; a Basic one is base64 of user:password, at least this long ("Basic settings" is not one).
_BEARER_RE = re.compile(r"\b(?:(?P<bearer>Bearer)\s+[A-Za-z0-9._~+/=-]+|(?P<basic>Basic)\s+[A-Za-z0-9+/]{12,}=*)",
                        re.IGNORECASE)
_USERINFO_RE = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.IGNORECASE)
# C0 controls but tab and newline, DEL and C1 controls: ESC starts ANSI/OSC sequences a terminal obeys.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret's literal value (the API key sent to the server) so every sink removes it."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _secrets.add(value)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME_RE.match(name))


def redact_text(text: str) -> str:
    """`text` with secret flag values, key=value secrets, Bearer/Basic credentials, URL user:password and
    every registered secret replaced by ***."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _FLAG_RE.sub(lambda m: f"{m['flag']}{m['sep']}{MASK}", text)
    text = _BEARER_RE.sub(lambda m: f"{m['bearer'] or m['basic']} {MASK}", text)
    text = _KEY_VALUE_RE.sub(lambda m: f"{m['key']}{m['sep']}{MASK}", text)
    return _USERINFO_RE.sub(lambda m: f"{m['scheme']}{MASK}@", text)


def redact_json(value: object, key: str = "") -> object:
    """A JSON-ready value with secrets removed: values under secret-named keys masked, strings redacted."""
    if key and is_secret_name(key) and value not in (None, "", False):
        return MASK
    if isinstance(value, dict):
        return {k: redact_json(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return redact_text(value) if isinstance(value, str) else value


def redacted_argv(argv: list[str]) -> list[str]:
    """argv with every secret removed: the value after a secret flag (both `--flag V` and `--flag=V`),
    and secrets inside other words (a --server-cmd string, an --engine-arg, a URL)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            out.append(MASK)
            skip = False
        elif arg.lower() in SECRET_FLAGS:
            out.append(arg)
            skip = True
        else:
            out.append(_redact_word(arg))
    return out


def _redact_word(arg: str) -> str:
    """One word; a word holding a command line (--server-cmd) is redacted word by word, and re-quoted only
    when something in it was a secret."""
    if " " in arg:
        try:
            words = shlex.split(arg)
        except ValueError:
            return redact_text(arg)
        redacted = redacted_argv(words)
        if redacted != words:
            return shlex.join(redacted)
    return redact_text(arg)


def printable(text: str) -> str:
    """`text` safe to print on a terminal: control characters (ESC of ANSI/OSC codes among them) shown
    as escapes, never sent raw."""
    return _CONTROL_RE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def safe(text: object) -> str:
    """Redacted and printable: what every line measure prints goes through."""
    return printable(redact_text(str(text)))


class RedactingFilter(logging.Filter):
    """Rewrites every log record's message through `safe` (installed on the handlers in main())."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = safe(record.getMessage()), None
        if record.exc_info:  # a traceback (with -v) is text too: formatted here, then cleaned
            record.exc_text = safe(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
