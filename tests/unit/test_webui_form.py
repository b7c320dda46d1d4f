"""The start form's option groups (loadline/runtime/webui_form.py): every Loadline option has a home."""

from __future__ import annotations

import argparse

from loadline.client import options as loadline_options
from loadline.runtime.webui_form import OTHER, camel, form_groups, posted_name, restored


def test_form_field_names_are_locusts_camel_case():
    assert camel("prompt_mix") == "promptMix" and camel("think_p90") == "thinkP90" and camel("model") == "model"


def test_groups_order_the_fields_and_unknown_options_go_last():
    groups = form_groups(["step_hold", "api_key", "prompt_mix", "baseline_hold", "burst_gap", "someone_elses"])
    order = sorted(groups, key=lambda name: groups[name]["order"])
    assert order == ["apiKey", "promptMix", "baselineHold", "stepHold", "burstGap", "someoneElses"]
    assert groups["stepHold"]["group"] == groups["baselineHold"]["group"] == "Stepped shape (StepShape)"
    assert groups["someoneElses"]["group"] == OTHER
    # a heading sorts before its own fields and after the previous group's
    assert groups["promptMix"]["base"] < groups["promptMix"]["order"] < groups["baselineHold"]["base"]


class _Parser(argparse.ArgumentParser):
    """Locust's parser keywords; remembers which options the web UI shows."""

    in_web_ui: set[str] = set()

    def add_argument(self, *args, include_in_web_ui=False, is_secret=False, env_var=None, **kwargs):
        action = super().add_argument(*args, **kwargs)
        if include_in_web_ui:
            self.in_web_ui.add(action.dest)
        return action


def test_the_trace_group_puts_the_file_first_then_its_warp_then_the_rest():
    names = ["trace_drain", "trace_schedule", "trace_surge", "trace_speed", "trace_file", "trace_window"]
    groups = form_groups(names)
    ordered = sorted(groups, key=lambda field: groups[field]["order"])
    assert ordered == ["traceFile", "traceSpeed", "traceWindow", "traceSurge", "traceDrain", "traceSchedule"]
    assert {g["group"] for g in groups.values()} == {"Trace replay (TraceShape)"}


def test_every_user_option_of_the_form_has_a_group_and_a_help_line():
    parser = _Parser()
    loadline_options.add_arguments(parser)
    actions = [a for a in parser._actions if a.dest in parser.in_web_ui]
    assert len(actions) > 10
    groups = form_groups([a.dest for a in actions])
    assert {name for name, g in groups.items() if g["group"] == OTHER} == set()
    assert all(a.help for a in actions)


def test_a_digit_after_a_letter_or_digit_is_posted_under_a_mangled_name_and_restored():
    # Locust's page: thinkP90 -> think_p9_0 (its camel -> snake regex splits every digit off)
    assert posted_name("think_p90") == "think_p9_0"
    assert posted_name("prompt_mix") == "prompt_mix" and posted_name("max_tokens") == "max_tokens"
    form = {"think_p9_0": ["2.5"], "think_mean": ["1"], "user_count": ["3"]}
    assert restored(form, ["think_p90", "think_mean"]) == {
        "think_p90": ["2.5"],
        "think_mean": ["1"],
        "user_count": ["3"],
    }
    # a field posted under its own name (a script, an older page) wins over the mangled one
    assert restored({"think_p90": ["3"], "think_p9_0": ["2"]}, ["think_p90"]) == {"think_p90": ["3"]}
