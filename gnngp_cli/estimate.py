"""Peak memory and time class of a GP run, told before it computes.

The estimate is of the process's peak resident memory, so it starts from what the process holds
now (interpreter, libraries and the loaded dataset: ``rss_now``) and adds what the run will
allocate, in bytes of the working dtype (``b`` bytes per entry):

- the normalised adjacency with unit self-loops, ``E' = E + N`` entries. Building it
  (:func:`~gnngp_cli.data.graph.normalized_adjacency` and the CSR copy) peaks at about
  ``(52 + 4 b) E'`` bytes (the edge list with its loops, the int64 sort key, the sort's order,
  the unique keys and their inverse, the coalesced output); afterwards it holds the COO list
  and the CSR copy, ``(24 + 2 b) E'``. The kernel starts after the build, so the peak is the
  larger of the build and what the kernel adds to the held adjacency;
- exact kernels (:func:`~gnngp_cli.kernels.planner.exact_kernel`): the largest dense block a
  layer holds, ``P`` entries (``Block.peak_elements`` on the planned rows and columns), times
  ``BYTES_PER_ENTRY_FACTOR`` for the ReLU expectation's and the products' temporaries;
- low-rank kernels: the root ``Q`` (``N x m`` for ``m`` landmarks) held by a layer, its
  successor and the ReLU's cross block (``3 N m``; measured on csbm graphs of 3 10^4 and 10^5
  nodes), and the ``m x m`` eigendecompositions;
- inference: the eigendecomposition of the training block (``3 n_train^2``, or ``3 m^2`` low
  rank) and the ``n_labelled x n_train`` cross block.

The time class comes from the same sizes as operations (dense: ``ENTRY_COST`` per entry of
``P`` per layer, for the ReLU expectation's transcendental functions and the sparse products,
measured on exact GCNIIGP on PubMed, and the ``n_train^3`` eigendecomposition; low rank:
``N m^2`` per layer), at 10 GFLOP/s, the order of this project's 2-core CI machine: "seconds" (under 10 s), "minutes"
(under 10 min) or "hours". A GPU is faster; the memory figure holds for its device memory
minus ``rss_now``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

BYTES_PER_ENTRY_FACTOR = 4   # a dense block plus the temporaries of the ReLU expectation and products
ROOTS_HELD = 3               # N x m roots (and same-shaped temporaries) alive at once in low rank
FLOPS_PER_SECOND = 1e10
ENTRY_COST = 400             # operations per dense entry and layer (exact GCNIIGP on PubMed: ~30 s for 2 x 3.9e8 entries)


@dataclass(frozen=True)
class Estimate:
    gb: float              # predicted peak resident memory of the process, GiB
    time_class: str        # seconds, minutes or hours
    detail: str            # what sizes it, e.g. "3,070 landmarks" or "K 2,541 x 644"

    def line(self, label: str, dataset: str) -> str:
        return f"{label} on {dataset}: ~{_gb(self.gb)} GB, {self.detail}, {self.time_class} (estimate before computing)"


def _gb(value: float) -> str:
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def time_class(flops: float) -> str:
    seconds = flops / FLOPS_PER_SECOND
    return "seconds" if seconds < 10 else "minutes" if seconds < 600 else "hours"


def gp_estimate(
    *, rss_now: float, num_nodes: int, num_edges: int, num_features: int, n_train: int, n_labelled: int,
    layers: int, bytes_per_entry: int, landmarks: Optional[int] = None, dense_elements: int = 0,
) -> Estimate:
    """The estimate for one GP run (sizes as in the module docstring; ``rss_now`` in bytes)."""
    b = bytes_per_entry
    edges = num_edges + num_nodes
    adjacency_build = (52 + 4 * b) * edges
    adjacency_held = (24 + 2 * b) * edges
    degree = edges / max(num_nodes, 1)
    if landmarks is not None:
        m = landmarks
        kernel = ROOTS_HELD * num_nodes * m * b + 3 * m * m * b + num_nodes * num_features * b
        inference = 3 * m * m * b + n_labelled * m * b
        flops = layers * (num_nodes * m * m + edges * m) + 2 * m ** 3
        detail = f"{m:,} landmarks"
    else:
        kernel = BYTES_PER_ENTRY_FACTOR * dense_elements * b
        inference = 3 * n_train * n_train * b + n_labelled * n_train * b
        flops = layers * dense_elements * (ENTRY_COST + 2 * degree) + 4 * n_train ** 3
        detail = f"dense blocks of up to {dense_elements:,} entries"
    total = rss_now + max(adjacency_build, adjacency_held + kernel + inference)
    return Estimate(total / 2**30, time_class(flops), detail)
