#!/usr/bin/env python3
"""ZeRO's stages as hetrl-exec runs them on this machine's CPU, against the cost model.

One plan whose training tasks run as two data-parallel replicas (one on each of two devices:
two processes under mpirun, one core each), run at ZeRO stage 0 (the gradients all-reduced),
1 and 2 (reduce-scattered, each process updating its stretch, the weights all-gathered) and 3
(the weights sharded between passes, each layer gathered in them, its gradients
reduce-scattered), round by round so that a slow spell of a shared machine falls on every
stage alike. For each stage and training task: the medians over all runs' iterations of the
measured seconds of the task and of its parts (passes, ZeRO-3's gathers within them, the
gradient sync, the optimizer step) next to the cost model's, against the cluster given
(a calibrated one: hetrl-exec prices the plan with it).

Writes OUT/zero-stages.csv and prints the table.

Usage: benchmarks/zero_stages.py OUT --cluster CLUSTER --plan PLAN [--workload W] [--rounds R]
           [--iterations N] [--layers L] [--hidden H] [--vocab V]
  PLAN: a plan over the cluster's two devices whose training tasks have two replicas
  (benchmarks/calibration_loop.py writes one as OUT/plan-tp.json).
"""
import argparse
import copy
import csv
import json
import os
import statistics
import sys

from calibration_loop import MPI, ROOT, run, tool

PARTS = ["passes", "weight_gathers", "gradient_reduce", "optimizer_step"]


def training_tasks(plan):
    return [(name, task) for group in plan["groups"] for name, task in group["tasks"].items() if "zero_stage" in task]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--workload", default=os.path.join(ROOT, "benchmarks", "calibration_loop", "ppo8.json"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=896)
    parser.add_argument("--vocab", type=int, default=16384)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    base = json.load(open(args.plan))
    trained = training_tasks(base)
    if not trained or any(len(task["replicas"]) != 2 for _, task in trained):
        sys.exit(f"{args.plan}: its training tasks must run as two data-parallel replicas")
    plans = {}
    for stage in range(4):
        plan = copy.deepcopy(base)
        for _, task in training_tasks(plan):
            task["zero_stage"] = stage
        plans[stage] = os.path.join(args.out, f"plan-zero{stage}.json")
        json.dump(plan, open(plans[stage], "w"), indent=1)

    reports = {stage: [] for stage in plans}
    for r in range(args.rounds):
        for stage, plan in plans.items():
            report = os.path.join(args.out, f"report-zero{stage}-{r}.json")
            run(MPI + [tool("hetrl-exec"), "--backend", "cpu", "--cluster", args.cluster, "--workload", args.workload,
                       "--plan", plan, "--layers", str(args.layers), "--hidden", str(args.hidden), "--vocab",
                       str(args.vocab), "--iterations", str(args.iterations), "--report", report])
            reports[stage].append(json.load(open(report)))
            print(f"round {r + 1}/{args.rounds}: ZeRO-{stage} done", file=sys.stderr)

    rows = []
    for stage, runs in reports.items():
        for name, _ in trained:
            tasks = [run["tasks"][name] for run in runs]
            row = {"zero_stage": stage, "task": name,
                   "predicted_s": tasks[0]["predicted_seconds"],
                   "measured_s": statistics.median(s for t in tasks for s in t["seconds"])}
            for part in PARTS:
                found = [t["parts"][part] for t in tasks if part in t["parts"]]
                row[f"{part}_predicted_s"] = found[0]["predicted_seconds"] if found else 0.0
                row[f"{part}_measured_s"] = statistics.median(s for f in found for s in f["seconds"]) if found else 0.0
            rows.append(row)
    with open(os.path.join(args.out, "zero-stages.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    def ratio(m, p):
        return f"{m / p:.2f}" if p > 0 else "-"
    print(f"{'ZeRO':>4} {'task':<13} {'measured s':>10} {'predicted':>9} {'ratio':>5} | "
          + " | ".join(f"{part} m/p" for part in PARTS))
    for row in rows:
        parts = " | ".join(f"{row[f'{part}_measured_s']:.4f}/{row[f'{part}_predicted_s']:.4f}" for part in PARTS)
        print(f"{row['zero_stage']:>4} {row['task']:<13} {row['measured_s']:>10.4f} {row['predicted_s']:>9.4f} "
              f"{ratio(row['measured_s'], row['predicted_s']):>5} | {parts}")


if __name__ == "__main__":
    main()
