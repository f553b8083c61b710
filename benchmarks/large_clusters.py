#!/usr/bin/env python3
"""Writes the large clusters docs/architecture.md ("Limits") measures, into the folder given.

  z256.json     256 zones of one 8-GPU node each (L4, L40S, A100 in turn), 10 zones a region
  links80.json  80 zones of two nodes, every pair of zones joined by a link (3,160 links)
  g100k4z.json  100,000 GPUs: 4 zones of 3,125 8-GPU nodes (L4, L40S, A100 in turn)

Then, for example:
  /usr/bin/time -f "%e s %M KB" build/release/apps/hetrl-plan --cluster OUT/g100k4z.json \\
      --workload tests/cli/data/grpo_small.json -o /dev/null
"""
import itertools
import json
import os
import sys

TYPES = ("A100-SXM-80G", "L40S", "L4")


def cluster(name, zones, nodes_per_zone, links=False):
    zone_names = [f"z{i}" for i in range(zones)]
    regions = [{"name": f"r{r}", "zones": zone_names[r * 10:(r + 1) * 10]} for r in range((zones + 9) // 10)]
    network = {"intra_zone": {"bandwidth_gbps": 400, "latency_ms": 0.02},
               "cross_zone": {"bandwidth_gbps": 100, "latency_ms": 0.5},
               "cross_region": {"bandwidth_gbps": 5, "latency_ms": 20}}
    if links:
        network["links"] = [{"zones": [a, b], "bandwidth_gbps": 5, "latency_ms": 10}
                            for a, b in itertools.combinations(zone_names, 2)]
    nodes = []
    for zone in zone_names:
        for k in range(nodes_per_zone):
            nodes.append({"name": f"{zone}-n{k}", "zone": zone, "gpu": TYPES[len(nodes) % len(TYPES)], "gpus": 8,
                          "nic_gbps": 400})
    return {"schema": "hetrl.cluster/v1", "name": name, "regions": regions, "network": network, "nodes": nodes}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: large_clusters.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, zones, per_zone, links in (("z256", 256, 1, False), ("links80", 80, 2, True), ("g100k4z", 4, 3125, False)):
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(cluster(name, zones, per_zone, links), f)


if __name__ == "__main__":
    main()
