#!/usr/bin/env python3
"""The calibration loop on this machine's CPU, end to end (issue: hetrl-exec; docs/exec.md).

Two processes (mpirun), each one core, stand for a node of two devices:
  1. hetrl-profile measures them (--backend cpu --quick) and hetrl-cluster makes the cluster;
  2. hetrl-plan plans the PPO workload of benchmarks/calibration_loop/ppo8.json on it;
  3. that plan and four others, each run by hetrl-exec against the measured cluster (before):
     different grouping (generation on one device, every other task on the other), different
     TP (the fitted plan's layout with each task's TP changed between 1 and 2: two TP-1
     replicas where it has one of TP 2, and the other way) and different batch (the fitted
     plan's layout over 16 prompts instead of 8), and a fourth with pipeline stages (every task
     one replica of two stages, one on each device). The runs go round by round, every plan in each
     round, so that a slow spell of a shared machine does not fall on one plan. The first plan's
     run of the last round fits the profile (--fit-profile) on its own iterations and on its
     earlier rounds' reports (--fit-on): the fit draws on the whole loop's stretch of time, as
     the comparison does (a fit on the first half alone met a slow first half in loop25);
  4. hetrl-cluster --from-profile of the fitted profile makes the calibrated cluster, and one
     more run of each plan (one iteration) is priced against it (after).
Writes OUT/calibration-loop.csv (per plan and task: the prediction before and after, the
simulator's seconds after, the measured seconds, each the median over the measured iterations
of all the plan's runs) and prints the table with each ratio, and the iteration's: hetrl-exec
runs a plan's tasks one after another, so its iteration is set beside the sum of the tasks'
predictions; the plan's own predicted iteration, which may overlap a group's tasks with
another's, is in the last column. OUT/memory.csv has each process's device memory at its most over
a plan's runs beside the cost model's need of its plan GPU, both by purpose.

Usage: benchmarks/calibration_loop.py OUT [--iterations N] [--runs R] [--layers L] [--hidden H] [--vocab V]
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APPS = os.path.join(ROOT, "build", "release", "apps")
DATA = os.path.join(ROOT, "benchmarks", "calibration_loop")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MPI = ["mpirun", "--oversubscribe", "-n", "2"]
# The execreport's memory terms: the cost model's need, and the run's peak by purpose.
NEED_TERMS = ("weights", "gradients", "optimizer", "activations", "kv_cache")
PURPOSES = ("weights", "gradients", "optimizer", "activations", "kv_cache", "workspace", "communication", "other")


def run(cmd):
    result = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout[-3000:]}")
    return result.stdout


def tool(name):
    return os.path.join(APPS, name)


def devices(plan):
    """The plan's node's first device, second device and both, as a plan names them."""
    node = sorted({g for group in plan["groups"] for g in group["gpus"]})[0].split(":")[0]
    return f"{node}:0", f"{node}:1", f"{node}:0-1"


def replica(gpus, layers, share=1.0):
    return {"share": share, "stages": [{"gpus": [gpus], "layers": layers}]}


def grouped(plan_path, out_path):
    """The fitted plan's tasks in two groups: generation on the first device, the rest on the second."""
    plan = json.load(open(plan_path))
    first, second, _ = devices(plan)
    tasks = plan["groups"][0]["tasks"]
    layers = tasks["generate"]["replicas"][0]["stages"][0]["layers"]
    rest = {}
    for name, task in tasks.items():
        if name == "generate":
            continue
        t = dict(task)
        t["replicas"] = [replica(second, layers)]
        if "zero_stage" in t:
            t["zero_stage"] = 0
        rest[name] = t
    out = {"schema": plan["schema"],
           "groups": [{"gpus": [first], "tasks": {"generate": {"replicas": [replica(first, layers)]}}},
                      {"gpus": [second], "tasks": rest}]}
    json.dump(out, open(out_path, "w"), indent=1)


def relaid(plan_path, out_path, lay):
    """The fitted plan over both devices, each task's replicas as lay(task, layers, first,
    second, both) sets them."""
    plan = json.load(open(plan_path))
    first, second, both = devices(plan)
    for group in plan["groups"]:
        group["gpus"] = [both]
        for task in group["tasks"].values():
            lay(task, task["replicas"][0]["stages"][0]["layers"], first, second, both)
    json.dump(plan, open(out_path, "w"), indent=1)


def other_tp(plan_path, out_path):
    """The fitted plan with each task's TP changed: one TP-2 replica over both devices becomes
    two TP-1 replicas, one on each, and two TP-1 replicas become one of TP 2."""
    def lay(task, layers, first, second, both):
        if len(task["replicas"]) == 1 and task["replicas"][0]["stages"][0]["gpus"] == [both]:
            task["replicas"] = [replica(gpu, layers, 0.5) for gpu in (first, second)]
            # The data-parallel pair trains at ZeRO-0 (the gradients all-reduced), as in
            # every loop before, so that loops compare; benchmarks/zero_stages.py runs this
            # plan at each ZeRO stage.
            if "zero_stage" in task:
                task["zero_stage"] = 0
        else:
            task["replicas"] = [replica(both, layers)]
    relaid(plan_path, out_path, lay)


def pipelined(plan_path, out_path):
    """The fitted plan with every task one replica of two pipeline stages, the first half of the
    layers on the first device and the rest on the second."""
    def lay(task, layers, first, second, both):
        task["replicas"] = [{"share": 1.0, "stages": [{"gpus": [first], "layers": layers // 2},
                                                      {"gpus": [second], "layers": layers - layers // 2}]}]
        if "zero_stage" in task:
            task["zero_stage"] = 0
    relaid(plan_path, out_path, lay)


def exec_run(args, cluster, workload, plan, report, extra=(), iterations=None):
    run(MPI + [tool("hetrl-exec"), "--backend", "cpu", "--cluster", cluster, "--workload", workload, "--plan", plan,
               "--layers", str(args.layers), "--hidden", str(args.hidden), "--vocab", str(args.vocab),
               "--iterations", str(iterations or args.iterations), "--report", report, *extra])
    return json.load(open(report))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--runs", type=int, default=6,
                        help="rounds, each a run of every plan; a task's figure is the median over all their "
                             "iterations, and the fit's over all the first plan's, so one slow spell of a shared "
                             "machine sets neither")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=896)
    parser.add_argument("--vocab", type=int, default=16384)
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    ppo8, ppo16 = os.path.join(DATA, "ppo8.json"), os.path.join(DATA, "ppo16.json")
    p = lambda name: os.path.join(out, name)

    run(MPI + [tool("hetrl-profile"), "--backend", "cpu", "--quick", "-o", p("profile.json")])
    profile = json.load(open(p("profile.json")))
    node = f"lab:2x{profile['gpu_type']}"
    run([tool("hetrl-cluster"), "--from-profile", p("profile.json"), "--node", node, "-o", p("measured.json")])
    run([tool("hetrl-plan"), "--cluster", p("measured.json"), "--workload", ppo8, "-o", p("plan-fit.json")])
    grouped(p("plan-fit.json"), p("plan-groups.json"))
    other_tp(p("plan-fit.json"), p("plan-tp.json"))
    pipelined(p("plan-fit.json"), p("plan-pp.json"))
    plans = [("fit (hybrid's plan)", ppo8, p("plan-fit.json")),
             ("grouping (generation on one device, the rest on the other)", ppo8, p("plan-groups.json")),
             ("TP (the fit's layout, each task's TP 1 <-> 2)", ppo8, p("plan-tp.json")),
             ("batch (the fit's layout, 16 prompts)", ppo16, p("plan-fit.json")),
             ("pipeline (every task two stages, one a device)", ppo8, p("plan-pp.json"))]

    # Round by round, each plan in turn, every run against the measured cluster: a slow spell
    # of a shared machine falls on every plan alike instead of on one plan's runs. What a run
    # measures does not depend on the cluster it is priced against, so the fit comes last, on
    # the first plan's runs of every round (its last run fits, pooling the others' reports),
    # and draws on the same stretch of time as the plans it is checked on.
    reports = [{"before": [], "after": []} for _ in plans]
    for r in range(args.runs):
        for index, (label, workload, plan) in enumerate(plans):
            extra = []
            if index == 0 and r == args.runs - 1:
                extra = ["--fit-profile", p("fitted.json")]
                for earlier in range(r):
                    extra += ["--fit-on", p(f"report-0-{earlier}.json")]
            reports[index]["before"].append(exec_run(args, p("measured.json"), workload, plan, p(f"report-{index}-{r}.json"),
                                                     extra))
    run([tool("hetrl-cluster"), "--from-profile", p("fitted.json"), "--node", node, "-o", p("calibrated.json")])
    fitted = json.load(open(p("fitted.json")))["fitted"]
    # The calibrated cluster's prices: one more run of each plan, priced against it (its
    # measurements count with the others').
    for index, (label, workload, plan) in enumerate(plans):
        reports[index]["after"].append(exec_run(args, p("calibrated.json"), workload, plan, p(f"report-{index}-after.json"),
                                                iterations=1))

    rows = []
    for index, (label, workload, plan) in enumerate(plans):
        reports_of = reports[index]
        everything = reports_of["before"] + reports_of["after"]
        iterations = []
        for report in everything:
            for i in range(len(next(iter(report["tasks"].values()))["seconds"])):
                iterations.append(sum(t["seconds"][i] for t in report["tasks"].values()))
        for task in everything[0]["tasks"]:
            measured = statistics.median(s for rep in everything for s in rep["tasks"][task]["seconds"])
            before = reports_of["before"][0]["tasks"][task]["predicted_seconds"]
            after = reports_of["after"][0]["tasks"][task]["predicted_seconds"]
            simulated = statistics.median(s for rep in reports_of["after"] for s in rep["tasks"][task].get("simulated_seconds", [0]))
            rows.append([label, task, before, after, simulated, measured, ""])
        # The iteration's tasks in turn, against the predicted tasks' sum; the plan's own
        # iteration, which may overlap one group's tasks with another's, in the last column.
        sequential = {when: sum(t["predicted_seconds"] for t in reports_of[when][0]["tasks"].values())
                      for when in ("before", "after")}
        rows.append([label, "iteration (tasks in turn)", sequential["before"], sequential["after"], "",
                     statistics.median(iterations), reports_of["after"][0]["predicted_iteration_seconds"]])
        # And the iteration as run (each group's processes on their own tasks): its period, from
        # one iteration's end to the next's, against the plan's iteration.
        periods = [it["period_seconds"] for rep in everything for it in rep.get("iterations_as_run", [])]
        if periods:
            plan_iteration = {when: reports_of[when][0]["predicted_iteration_seconds"] for when in ("before", "after")}
            rows.append([label, "iteration (as run)", plan_iteration["before"], plan_iteration["after"], "",
                         statistics.median(periods), ""])

    with open(p("calibration-loop.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["plan", "task", "predicted_before_s", "predicted_after_s", "simulated_after_s", "measured_s",
                    "plan_iteration_after_s"])
        w.writerows(rows)
    # Each process's device memory at its most over the plan's runs, beside the cost model's
    # need of the plan GPU it stands for (the after run's, against the calibrated cluster), and
    # both by purpose (the run with the highest peak's).
    memory = []
    for index, (label, workload, plan) in enumerate(plans):
        everything = reports[index]["before"] + reports[index]["after"]
        for d, device in enumerate(reports[index]["after"][0].get("devices", [])):
            highest = max(everything, key=lambda rep: rep["devices"][d]["peak_bytes"])["devices"][d]
            at_peak = highest.get("peak_by_purpose", {})
            need = device.get("predicted_by_purpose", {})
            memory.append([label, d, device.get("predicted_bytes", ""), highest["peak_bytes"]] +
                          [need.get(k, "") for k in NEED_TERMS] + [at_peak.get(k, "") for k in PURPOSES])
    with open(p("memory.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["plan", "process", "predicted_bytes", "peak_bytes"] + [f"need_{k}" for k in NEED_TERMS] +
                   [f"peak_{k}" for k in PURPOSES])
        w.writerows(memory)
    extra = "".join(f", {name} {fitted[key]:.3f}" for key, name in
                    (("prefill_efficiency", "prefill efficiency"), ("copy_efficiency", "copy efficiency"),
                     ("tp_wait", "TP wait"), ("decode_allreduce_ms", "decode TP all-reduce (ms)"))
                    if key in fitted)
    print(f"fitted on the first plan: pass efficiency {fitted['pass_efficiency']:.3f}, optimizer efficiency "
          f"{fitted['optimizer_efficiency']:.3f}, decode step overhead {fitted['decode_step_overhead_ms']:.3g} ms"
          + extra)
    print(f"{'plan':<60} {'task':<26} {'before':>8} {'after':>8} {'measured':>9} {'m/before':>8} {'m/after':>8}")
    for label, task, before, after, simulated, measured, overlapped in rows:
        if task in ("advantage",):
            continue
        print(f"{label:<60} {task:<26} {before:>8.4f} {after:>8.4f} {measured:>9.4f} {measured / before:>8.2f} "
              f"{measured / after:>8.2f}" + (f"   (the plan's iteration: {overlapped:.4f})" if overlapped else ""))
    # MiB of the peak against the need, term by term: weights, gradients, optimizer; then the
    # transient (activations and KV cache against the run's activations, KV cache, workspace
    # and communication buffers).
    print(f"\n{'plan':<60} {'process':>7} {'need MiB':>9} {'peak MiB':>9} {'peak/need':>9}   "
          f"weights, gradients, optimizer, transient: peak/need MiB")
    for label, process, need, peak, *terms in memory:
        ratio = f"{peak / need:>9.2f}" if need else f"{'-':>9}"
        need_text = f"{need / 2**20:>9.1f}" if need else f"{'-':>9}"
        want = dict(zip(NEED_TERMS, terms[:len(NEED_TERMS)]))
        have = dict(zip(PURPOSES, terms[len(NEED_TERMS):]))
        mib = lambda x: f"{x / 2**20:.1f}" if x != "" else "-"
        parts = [f"{mib(have[k])}/{mib(want[k])}" for k in ("weights", "gradients", "optimizer")]
        transient_need = (want["activations"] or 0) + (want["kv_cache"] or 0) if want["weights"] != "" else ""
        transient = sum(have[k] or 0 for k in ("activations", "kv_cache", "workspace", "communication", "other"))
        parts.append(f"{mib(transient)}/{mib(transient_need)}")
        print(f"{label:<60} {process:>7} {need_text} {peak / 2**20:>9.1f} {ratio}   " + ", ".join(parts))


if __name__ == "__main__":
    main()
