"""`loadline twin`: fit a simulator twin to a run, and ask it what-if questions.

loadline twin fit RUN [RUN ...] [--out DIR] [--replay]
loadline twin predict TWIN [--max-num-seqs N] [--replicas N] [--kv-blocks N] [--context-len N]
                           [--set KEY=VALUE] [--shape S] [-- LOAD OPTIONS, e.g. --prompt-mix long=1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from loadline.core.errors import UsageError

HELP = """Digital twin. `fit RUN` writes a simulator profile fitted to the run (twin.toml) and, per
parameter, its evidence and how well the run identifies it (twin.json); several runs of one engine
setup are pooled into one fit. --replay also runs the twin on the (first) run's own load and states,
per phase, how well it reproduces throughput, TTFT and ITL.
`predict TWIN` serves the twin with what-if changes (batch/slot cap, KV blocks, context length,
replicas, any profile key; load shape, rate, prompt and reply mix as Locust options after `--`),
replays the load time-compressed and answers with a report's figures: knee, break point, max
SLO-compliant load, limiting layer, each phase with its stated error, wider outside the fitted range.
See docs/twin.md."""

PASS_THROUGH = "locust_args"  # main.py hands everything after `--` over as args.locust_args
ALIASES = {
    "max_num_seqs": "max_num_seqs",
    "replicas": "replicas",
    "kv_blocks": "num_gpu_blocks",
    "context_len": "max_model_len",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    fit = sub.add_parser("fit", help="fit a twin to a run folder")
    fit.add_argument(
        "run",
        metavar="RUN",
        nargs="+",
        help="the run folder; several runs of the same engine setup are pooled (each is one sample of the host)",
    )
    fit.add_argument("--out", help="where to write twin.toml and twin.json (default RUN/twin, the first RUN's)")
    fit.add_argument(
        "--replay", action="store_true", help="run the twin on the run's load and measure the fit per phase"
    )
    fit.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="the replay's time compression (default: the twin's, see docs/twin.md)",
    )
    fit.add_argument("--json", action="store_true", help="print twin.json")
    pred = sub.add_parser("predict", help="answer a what-if with a time-compressed run of the twin")
    pred.add_argument("twin", metavar="TWIN", help="the folder `twin fit` wrote (or its twin.json)")
    pred.add_argument("--max-num-seqs", type=int, help="batch / slot cap per replica")
    pred.add_argument("--replicas", type=int, help="replicas behind the endpoint")
    pred.add_argument("--kv-blocks", type=int, help="KV-cache blocks per replica (num_gpu_blocks)")
    pred.add_argument("--context-len", type=int, help="longest sequence the engine admits (max_model_len)")
    pred.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any simulator profile key")
    pred.add_argument("--shape", help="load shape (default: the fitted run's)")
    pred.add_argument("--scenario", help="user behaviour (default: the fitted run's)")
    pred.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="time compression of the prediction (default: the twin's, see docs/twin.md)",
    )
    pred.add_argument("--out", help="where the prediction's files go (default TWIN/predictions/<time>)")
    pred.add_argument("--json", action="store_true", help="print the prediction as JSON")
    parser.epilog = "predict: load changes go after `--` as Locust options, e.g. -- --prompt-mix long=1 --step-hold 60"


def what_if_of(args: argparse.Namespace) -> Any:
    from loadline.commands.twin_predict import WhatIf
    from loadline.simulator.config import coerce, parse_assignment

    changes: dict[str, Any] = {}
    for option, key in ALIASES.items():
        value = getattr(args, option, None)
        if value is not None:
            if value < 1:
                raise UsageError(f"--{option.replace('_', '-')} must be >= 1 (got {value})")
            changes[key] = value
    for text in args.set:
        key, value = parse_assignment(text)
        changes[key] = coerce(key, value)
    if args.time_scale is not None and not args.time_scale > 0:
        raise UsageError(f"--time-scale must be > 0 (got {args.time_scale})")
    return WhatIf(changes, list(getattr(args, "locust_args", []) or []), args.shape, args.scenario, args.time_scale)


def _fit(args: argparse.Namespace) -> int:
    from loadline.analysis.data.load import load_run
    from loadline.analysis.twin.fit import fit
    from loadline.commands import twin_predict
    from loadline.commands.twin_replay import goodness

    for run in args.run:
        if not Path(run).is_dir():
            raise UsageError(f"run folder not found: {run}")
    if len({Path(run).resolve() for run in args.run}) < len(args.run):
        raise UsageError("a run folder is given twice: each run counts once")
    profile = fit([load_run(run) for run in args.run])
    first = Path(args.run[0])
    out = Path(args.out) if args.out else first / "twin"
    if args.replay:  # on the first run's load (the one the twin's workload replays), compared with that run
        replay_dir = twin_predict.run_twin(profile, twin_predict.WhatIf(time_scale=args.time_scale), out / "replay")
        profile.goodness = goodness(first, replay_dir)
        profile.notes.append(f"replayed in {replay_dir}")
    toml, js = profile.write(out)
    if args.json:
        print(js.read_text())
        return 0
    print(render_fit(profile))
    print(f"\nwrote {toml} and {js}")
    return 0


def render_fit(profile: Any) -> str:
    lines = [f"twin of {profile.run}: {profile.engine}, {profile.replicas} replica(s)"]
    lines += [f"note: {note}" for note in profile.notes] + [""]
    for p in profile.parameters:
        if p.evidence.startswith("the twin's unit machine"):
            continue
        lines.append(f"{p.name} = {p.value}  [{p.grade}] {p.evidence}")
    rng = profile.fitted_range
    lines += [
        "",
        f"fitted range: up to {rng.max_users:g} users, {rng.max_rps:g} req/s, {rng.max_running:g} running per replica; "
        f"prompts {rng.prompt_tokens[0]}-{rng.prompt_tokens[1]} tokens (p5-p95); cap {rng.cap if rng.cap is not None else 'not reached'}",
    ]
    if profile.goodness:
        lines += ["", "replay of the run's load on the twin (relative error per phase):"]
        for row in profile.goodness:
            errors = ", ".join(f"{k[:-6]} {v:+.0%}" for k, v in row.items() if k.endswith("_error") and v is not None)
            lines.append(f"  {row['phase']}: {errors}")
    return "\n".join(lines)


def _predict(args: argparse.Namespace) -> int:
    from loadline.commands import twin_predict

    profile, folder = twin_predict.load_profile(args.twin)
    what_if = what_if_of(args)
    out = Path(args.out) if args.out else folder / "predictions" / time.strftime("%Y%m%d-%H%M%S")
    result = twin_predict.predict(profile, what_if, out)
    (out / "prediction.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps(result, indent=2, default=str) if args.json else twin_predict.render(result))
    return 0


def main(args: argparse.Namespace) -> int:
    return _fit(args) if args.action == "fit" else _predict(args)
