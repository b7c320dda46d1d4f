"""Keep secret options (--api-key) out of the web UI page.

Locust embeds every UI option's startup value in the page (`window.templateArgs`), secrets included:
`is_secret` only masks the input box, and a value from the environment variable is embedded too.
Here the page gets an empty box, and an empty box at /swarm means "keep the value given at startup",
so a key from LOADLINE_API_KEY still reaches the users (and the workers) without being shown.
"""

from __future__ import annotations

from flask import request
from werkzeug.datastructures import ImmutableMultiDict


def hide_secrets(environment) -> None:
    web_ui = environment.web_ui
    refresh = web_ui.update_template_args  # Locust rebuilds the options on every page load
    secret_names: set[str] = set()

    def refresh_without_secrets() -> None:
        refresh()
        for name, option in (web_ui.template_args.get("extra_options") or {}).items():
            if option.get("is_secret"):
                secret_names.add(name)
                option["default_value"] = ""

    web_ui.update_template_args = refresh_without_secrets
    refresh_without_secrets()

    @web_ui.app.before_request
    def _keep_startup_secrets():
        if request.method != "POST" or not request.path.endswith("/swarm"):
            return
        form = request.form.copy()
        for name in secret_names:
            if not form.get(name):
                form[name] = str(getattr(environment.parsed_options, name, "") or "")
        request.form = ImmutableMultiDict(form)  # werkzeug's cached form: the swarm handler reads this copy
