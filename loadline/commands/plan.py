"""`loadline plan`: replicas for a target rate, water levels, and a GPU memory estimate."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from loadline.analysis.data.load import load_run
from loadline.analysis.report.build import analyse, resolve_slo
from loadline.analysis.verdict import capacity
from loadline.core import runfolder
from loadline.core.answer import Answer, Status, Trust
from loadline.core.errors import UsageError

HELP = """Capacity plan: replicas = target / per-replica x 1.2, rounded up at the horizontal
efficiency assumed (2 replicas = 1.6-1.8x one), + 1 spare, water levels (green < 70 %, yellow 70-85 %, red > 85 %)
and, with --params-b, the GPU memory for weights + KV cache + 20 % runtime.
The per-replica figure is given (--per-replica-qps), predicted by a fitted twin (--twin, docs/twin.md), or read from a run folder (--run: the run's answer,
its max SLO-compliant load divided by the replicas behind the target, as its report says), with a
caution line for what that answer says against trusting its numbers (trust, no safe load).
Example: loadline plan --target-qps 500 --per-replica-qps 240   ->  5 replicas (3 if replicas scaled
linearly; at 70 % added-replica efficiency 4 carry the 1.2 margin, + 1 spare)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target-qps", type=float, help="peak requests/s the service must carry")
    parser.add_argument("--per-replica-qps", type=float, help="max SLO-compliant requests/s of one replica")
    parser.add_argument("--run", metavar="RUN_DIR", help="read the per-replica figure from this run folder's knee")
    parser.add_argument(
        "--twin",
        metavar="TWIN_DIR",
        help="predict the per-replica figure with a fitted twin (`loadline twin fit`): a time-compressed run of it",
    )
    parser.add_argument(
        "--twin-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what-if change to the twin's profile before it predicts (repeatable), e.g. max_num_seqs=16",
    )
    parser.add_argument("--margin", type=float, default=capacity.MARGIN, help="safety multiplier (default 1.2)")
    parser.add_argument(
        "--spares", type=int, default=capacity.SPARES, help="spare replicas for availability (default 1: N+1)"
    )
    parser.add_argument(
        "--efficiency",
        type=float,
        default=capacity.ADDED_REPLICA_EFFICIENCY,
        help="share of one replica each added replica contributes (default 0.7: 2 replicas = 1.7x)",
    )
    parser.add_argument("--forecast-qps", type=float, help="six-month forecast: adds a mid-term plan at forecast x 1.5")
    mem = parser.add_argument_group("GPU memory estimate (all optional; needs --params-b)")
    mem.add_argument("--params-b", type=float, help="parameters, in billions (e.g. 8)")
    mem.add_argument("--layers", type=int, default=32)
    mem.add_argument("--kv-heads", type=int, default=8)
    mem.add_argument("--head-dim", type=int, default=128)
    mem.add_argument("--dtype", default="bf16", help=f"weights dtype: {', '.join(capacity.DTYPE_BYTES)}")
    mem.add_argument("--kv-dtype", help="KV cache dtype (default: same as --dtype)")
    mem.add_argument("--context", type=int, default=4096, help="tokens per sequence (prompt + output)")
    mem.add_argument("--concurrency", type=int, default=64, help="sequences held in the KV cache at once")
    mem.add_argument("--gpu-memory-gb", type=float, help="memory of the GPU(s) of one replica, for the water level")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def answer_of_run(run_dir: str) -> Answer:
    """The run's answer: its report's (report/verdict.json), else computed now as the report would."""
    if not Path(run_dir).is_dir():
        raise UsageError(f"run folder not found: {run_dir}")
    path = Path(run_dir) / runfolder.REPORT_DIR / runfolder.VERDICT
    try:
        return Answer.from_dict(json.loads(path.read_text())["answer"])
    except (OSError, ValueError, KeyError, TypeError):  # no report yet, or one from an older Loadline
        run = load_run(run_dir)
        slo, source = resolve_slo(run.manifest)
        return Answer.from_dict(analyse(run, slo, source)[1]["answer"])


def _per_replica_from_run(run_dir: str, answer: Answer) -> tuple[float, str]:
    if not answer.per_replica_rps:
        raise UsageError(f"{run_dir}: no per-replica figure ({answer.per_replica_basis}); give --per-replica-qps")
    return answer.per_replica_rps, answer.per_replica_basis


def _per_replica_from_twin(twin: str, sets: list[str]) -> tuple[float, str, list[str]]:
    """The twin's predicted max SLO-compliant load per replica, with its stated error as a caution."""
    from loadline.commands import twin_predict
    from loadline.simulator.config import coerce, parse_assignment

    profile, folder = twin_predict.load_profile(twin)
    changes = {key: coerce(key, value) for key, value in (parse_assignment(text) for text in sets)}
    result = twin_predict.predict(
        profile, twin_predict.WhatIf(changes), folder / "plans" / time.strftime("%Y%m%d-%H%M%S")
    )
    per_replica = result["figures"]["per_replica_rps"]
    if not per_replica:
        raise UsageError(f"the twin's prediction ({result['run']}) found no SLO-compliant load; give --per-replica-qps")
    compliant = [p for p in result["phases"] if p["phase"] and p["phase"] in result["figures"]["max_compliant"]]
    error = compliant[0]["error"] if compliant else result["base_error"]
    doubts = [f"predicted by the twin ({result['run']}): +-{error:.0%} on its figures"]
    doubts += [
        f"the twin's prediction is outside its fitted range: {r}" for p in compliant for r in p["outside_fitted_range"]
    ]
    basis = f"the twin of {profile.run}{' with ' + ', '.join(sets) if sets else ''}: max SLO-compliant load per replica"
    return float(per_replica), basis, doubts


def run_doubts(run_dir: str, answer: Answer) -> list[str]:
    """What the run's answer says against trusting its numbers (trust), or against any load being safe
    (a break that came with time): a plan built on that run inherits the doubt. [] when nothing; a
    hint when there is no report yet (the answer was computed without writing one)."""
    path = Path(run_dir) / runfolder.REPORT_DIR / runfolder.VERDICT
    doubts = [] if path.is_file() else [f"no report in {run_dir} yet: `loadline report {run_dir}` writes it"]
    if answer.status is Status.UNUSABLE:
        return doubts + [f"the run's answer: {answer.reason}"]
    if answer.trust in (Trust.DOUBTFUL, Trust.UNTRUSTED):
        doubts += [f"the run's answer (trust {answer.trust.value}): {reason}" for reason in answer.trust_reasons]
    if not answer.safe.found:
        doubts.append(f"the run's answer: safe operating point {answer.safe.text()}")
    return doubts


def build(args: argparse.Namespace) -> dict:
    if args.per_replica_qps is None and not args.run and not getattr(args, "twin", None):
        raise UsageError("give --per-replica-qps Q, --run RUN_DIR or --twin TWIN_DIR")
    basis = "given on the command line"
    per_replica = args.per_replica_qps
    twin_doubts: list[str] = []
    if per_replica is None and getattr(args, "twin", None):
        per_replica, basis, twin_doubts = _per_replica_from_twin(args.twin, args.twin_set)
    answer = answer_of_run(args.run) if per_replica is None else None  # read (or computed) once
    if answer is not None:
        per_replica, basis = _per_replica_from_run(args.run, answer)
    if per_replica <= 0:
        raise UsageError("--per-replica-qps must be > 0")
    out: dict = {"per_replica_qps": round(per_replica, 3), "basis": basis}
    if answer is not None:
        out["doubts"] = run_doubts(args.run, answer)
    if twin_doubts:
        out["doubts"] = twin_doubts
    if args.target_qps is not None:
        try:
            out["plan"] = capacity.plan(
                args.target_qps, per_replica, args.margin, args.spares, args.efficiency, args.forecast_qps
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.params_b is not None:
        shape = capacity.ModelShape(args.params_b, args.layers, args.kv_heads, args.head_dim, args.dtype, args.kv_dtype)
        try:
            out["gpu_memory"] = capacity.gpu_memory(
                shape, args.context, args.concurrency, gpu_memory_gb=args.gpu_memory_gb
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return out


def render(out: dict) -> str:
    lines = [f"per-replica throughput: {out['per_replica_qps']:g} req/s ({out['basis']})"]
    lines += [f"caution: {doubt}" for doubt in out.get("doubts", [])]
    plan = out.get("plan")
    if plan:
        eff = plan["horizontal_efficiency"]
        lines += [
            "",
            f"replicas for {plan['target_qps']:g} req/s: {plan['replicas']}",
            *[f"  {s}" for s in plan["steps"]],
            f"horizontal efficiency: {eff['assumption']}",
            f"  {plan['replicas']} replicas carry ~{eff['capacity_qps']:g} req/s (linear would be {eff['linear_capacity_qps']:g}); "
            f"one down: ~{eff['capacity_one_down_qps']:g}",
            f"water level: {_level(plan['water_level'])}; with one replica down: {_level(plan['water_level_one_replica_down'])}",
            f"  bands: green {plan['bands']['green']}, yellow {plan['bands']['yellow']}, red {plan['bands']['red']}",
        ]
        if plan.get("mid_term"):
            mid = plan["mid_term"]
            lines.append(
                f"mid term: forecast {mid['forecast_qps']:g} x 1.5 = {mid['plan_qps']:g} req/s -> {mid['replicas']} replicas"
            )
    else:
        lines.append("(give --target-qps for a replica count)")
    mem = out.get("gpu_memory")
    if mem:
        lines += [
            "",
            f"GPU memory per replica: {mem['total_gb']:g} GB = weights {mem['weights_gb']:g} + KV cache {mem['kv_cache_gb']:g} "
            f"({mem['kv_bytes_per_token']} B/token x {mem['context_tokens']} tokens x {mem['concurrency']} sequences) "
            f"+ runtime {mem['runtime_gb']:g}",
        ]
        if "water_level" in mem:
            lines.append(
                f"  on {mem['gpu_memory_gb']:g} GB: {_level(mem['water_level'])}; GPUs needed to stay <= 85 %: {mem['gpus_needed']}"
            )
    return "\n".join(lines)


def _level(level: dict) -> str:
    share = level.get("utilisation")
    return f"{level['level']} ({share:.0%})" if share is not None else level["level"]


def main(args: argparse.Namespace) -> int:
    out = build(args)
    print(json.dumps(out, indent=2) if args.json else render(out))
    return 0
