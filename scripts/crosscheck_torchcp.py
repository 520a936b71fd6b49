"""Cross-check gnngp's conformal scores (gnngp_cli/conformal.py) against TorchCP's.

TorchCP is not a dependency: ``import torchcp`` imports its LLM and training modules, which need
transformers, torchvision and torchsort, and torchsort ships only a source distribution that
compiles against torch (see docs/conformal.md). This script reads TorchCP's own score classes
from an unpacked wheel, with those three modules stubbed (the scores never call them):

    pip download torchcp==1.2.1 --no-deps -d /tmp/tcp && unzip -q /tmp/tcp/*.whl -d /tmp/tcp/x
    python scripts/crosscheck_torchcp.py /tmp/tcp/x

It prints the largest difference of each score (TorchCP computes in float32).
"""
from __future__ import annotations

import sys
import types

import torch


def main(wheel_dir: str) -> int:
    import torch_geometric.loader  # noqa: F401 - imported before the stubs (PyG inspects modules)

    sys.path.insert(0, wheel_dir)

    class Stub(types.ModuleType):
        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return type(attr, (), {})

    for name in ("torchsort", "transformers", "torchvision", "torchvision.transforms", "torchvision.datasets", "torchvision.models"):
        module = Stub(name)
        module.__file__, module.__path__ = f"/nonexistent/{name}.py", []
        sys.modules[name] = module
    from torch_geometric.data import Data
    from torchcp.classification.score import APS, LAC, RAPS
    from torchcp.graph.score import DAPS

    from gnngp_cli.conformal import Calibration, aps_scores, class_ranks, class_scores, neighbour_mean

    torch.manual_seed(0)
    logits = torch.randn(200, 6)
    probs = torch.softmax(logits.double(), 1)
    ones = torch.ones(200, dtype=torch.float64)   # TorchCP's non-randomised APS is the randomised one at u = 1
    base = aps_scores(probs, ones)
    edges = torch.randint(0, 200, (2, 300))
    edges = torch.unique(torch.cat([edges, edges.flip(0)], 1), dim=1)
    edges = edges[:, edges[0] != edges[1]]
    connected = torch.zeros(200).index_add_(0, edges[1], torch.ones(edges.size(1))) > 0   # TorchCP gives an isolated node (1 - coef) of its score
    checks = {
        "tps (TorchCP LAC)": (LAC(score_type="softmax")(logits), class_scores(Calibration("tps"), probs)),
        "aps": (APS(score_type="softmax", randomized=False)(logits), base),
        "raps": (RAPS(score_type="softmax", randomized=False, penalty=0.1, kreg=1)(logits),
                 base + 0.1 * (class_ranks(probs) - 1).clamp_min(0).double()),
        "daps": (DAPS(Data(edge_index=edges, num_nodes=200), APS(score_type="softmax", randomized=False), neigh_coef=0.5)(logits)[connected],
                 (0.5 * base + 0.5 * neighbour_mean(base, edges, 200))[connected]),
    }
    worst = 0.0
    for name, (theirs, ours) in checks.items():
        diff = float((theirs.double() - ours).abs().max())
        worst = max(worst, diff)
        print(f"{name:18s} largest difference {diff:.2e}")
    return 0 if worst < 1e-5 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tcp/x"))
