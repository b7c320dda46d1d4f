"""Run folder helpers: secrets are redacted, real config is not."""

from loadline.core.runfolder import new_run_dir, redact


def test_redact_hides_secrets_but_keeps_config():
    config = {
        "api_key": "sk-1",
        "auth_token": "t",
        "password": "p",
        "max_tokens": 256,
        "first_token_timeout": 60.0,
        "secret": 0,
        "nested": {"Authorization": "Bearer x", "tokens_source": "usage"},
        "token": "",
    }
    clean = redact(config)
    assert clean["api_key"] == clean["auth_token"] == clean["password"] == clean["secret"] == "***"
    assert clean["nested"]["Authorization"] == "***" and clean["nested"]["tokens_source"] == "usage"
    assert clean["max_tokens"] == 256 and clean["first_token_timeout"] == 60.0 and clean["token"] == ""


def test_run_dirs_never_collide(tmp_path):
    first, second = new_run_dir(tmp_path, "a b/c"), new_run_dir(tmp_path, "a b/c")
    assert first != second and first.is_dir() and second.is_dir() and "/" not in first.name[16:]
