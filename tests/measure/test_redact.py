"""measure/redact.py: what is masked on each channel, and what must be left alone (token counts, commands)."""

from __future__ import annotations

import logging

import pytest

from measure.redact import MASK, RedactingFilter, printable, redact_json, redact_text, redacted_argv, register_secret


@pytest.mark.parametrize("text,secret", [
    ("vllm serve m --api-key sk-a1 --port 8", "sk-a1"),
    ("x --api-key=sk-a2 y", "sk-a2"),
    ('{"api_key": "sk-a3", "n": 1}', "sk-a3"),
    ("OPENAI_API_KEY=sk-a4 hf_token=hf-a5", "sk-a4"),
    ("http://bench:pw-a6@127.0.0.1:8000/v1", "pw-a6"),
    ('HTTP 401: {"headers": {"Authorization": "Bearer sk-a7"}}', "sk-a7"),
    ("Authorization: Basic YmVuY2g6cHctYTg=", "YmVuY2g6cHctYTg"),
])
def test_each_channel_is_masked(text, secret):
    out = redact_text(text)
    assert secret not in out and MASK in out


def test_counts_and_ordinary_words_are_left_alone():
    text = "max_num_batched_tokens=8192 kv_cache_tokens: 914000 prompt_tokens=7; Basic settings"
    assert redact_text(text) == text
    assert redact_json({"kv_cache_tokens": 5, "max_num_batched_tokens": 8}) == {"kv_cache_tokens": 5,
                                                                                "max_num_batched_tokens": 8}


def test_a_registered_key_is_removed_wherever_it_shows_up():
    register_secret("zq-registered-77")
    assert "zq-registered-77" not in redact_text("body echoed zq-registered-77 back")


def test_argv_masks_flag_values_and_secrets_inside_a_server_cmd_and_leaves_plain_commands_as_given():
    plain = "vllm serve {model} --port {port}"
    argv = ["--server-cmd", plain, "--api-key", "sk-b1", "--server-cmd", "srv --api-key sk-b2 --port {port}",
            "--engine-arg", "api_key=sk-b3"]
    out = redacted_argv(argv)
    assert out[1] == plain and out[3] == MASK
    assert not any(s in " ".join(out) for s in ("sk-b1", "sk-b2", "sk-b3"))


def test_json_masks_values_under_secret_names_at_any_depth():
    out = redact_json({"engine_args": {"api_key": "sk-c1", "hf_token": "hf-c2"}, "runs": [{"url": "http://u:pw@h"}]})
    assert out == {"engine_args": {"api_key": MASK, "hf_token": MASK}, "runs": [{"url": f"http://{MASK}@h"}]}


def test_control_characters_are_shown_as_escapes_and_log_records_are_cleaned():
    assert printable("a\x1b[31mb\x07\x9bc\td\n") == "a\\x1b[31mb\\x07\\x9bc\td\n"
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "got %s", ("\x1b]8;;http://e\x07 Bearer sk-d1",), None)
    RedactingFilter().filter(record)
    assert "\x1b" not in record.getMessage() and "sk-d1" not in record.getMessage()
