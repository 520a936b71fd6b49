"""Peak memory and time class of a GP run, told before it computes.

The estimate is of the process's peak resident memory. It is made once the dataset is loaded and
the normalised adjacency built, so it starts from what the process holds now (interpreter,
libraries, the dataset, the adjacency: ``rss_now``) and from its peak so far (``peak_now``: the
adjacency's build, a sort of the edge list, has passed), and adds what the run will allocate,
in bytes of the working dtype (``b`` bytes per entry):

- exact kernels (:func:`~gnngp_cli.kernels.planner.exact_kernel`): the largest dense block a
  layer holds, ``P`` entries (``Block.peak_elements`` on the planned rows and columns), times
  ``BYTES_PER_ENTRY_FACTOR`` for the ReLU expectation's and the products' temporaries (at an
  independent addition, its branches' outputs too: :func:`dense_factor`), then the
  inference: the eigendecomposition of the training block (``3 n_train^2``) and the
  ``n_labelled x n_train`` cross block;
- low-rank kernels: the roots ``Q`` (``N x m`` for ``m`` landmarks) alive at once. Up to
  ``ROW_BLOCK_ENTRIES`` entries in ``Q`` that is a layer's input, the ReLU's cross block and its
  output (``3 N m``; measured on csbm graphs of 3 10^4 and 10^5 nodes); past it the ReLU, the
  convolution and the variances go by row blocks, so a layer's input and output plus a few
  blocks (``2 N m + 4 ROW_BLOCK_ENTRIES``; measured on a Reddit-sized graph). Then the
  inference on the last root: its training rows and the eigendecomposition of its ``m x m``
  Gram matrix, ``EIGH_SQUARES`` such blocks alive at once (the Gram matrix, the scaled copy
  that tells a diagonal one, the symmetrised and the cleaned copies, the eigenvectors and
  LAPACK's workspace of two; H2GCNGP-X on chameleon, roots 7 x 1,092 = 7,644 wide on 2,277
  nodes: 2.6 GB, nearly all of it these blocks).
- graph operators that a network applies besides the adjacency (H2GCN's 1- and 2-hop
  operators): built before the estimate (the run needs them, the exact planning reads them),
  so ``rss_now`` holds them and ``peak_now`` their build (the exact 2-hop operator of tolokers,
  45 million entries: 3.8 GB at its build, 1.2 GB held).
- a kernel of a linear network (no activation), exact or low rank, stays a root of its input's
  width (``root_width``): no dense block, and no root as wide as the landmarks.

The time class comes from the same sizes as operations (dense: ``ENTRY_COST`` per entry of
``P`` per layer, for the ReLU expectation's transcendental functions and the sparse products,
measured on exact GCNIIGP on PubMed, and the ``n_train^3`` eigendecomposition; low rank:
``N m^2`` per layer), at 10 GFLOP/s: "seconds" (under a minute), "minutes" (under an hour) or
"hours", the line telling the predicted duration too. Dense work on this project's 2-core CI machine
runs at about that rate; low-rank work, dense products at the GEMM peak, runs several times faster
(docs/usage.md). A GPU is faster; the memory figure holds for its device memory
minus ``rss_now``. ``fit=mll`` evaluates the kernel and its gradient at each of its steps
(:func:`fit_evaluations`: ``FIT_STEP_COST`` kernel evaluations a step), each candidate's fit
before the chosen kernel's run.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ..runtime import ROW_BLOCK_ENTRIES

BYTES_PER_ENTRY_FACTOR = 4   # a dense block plus the temporaries of the ReLU expectation and products
EIGH_SQUARES = 7             # m x m blocks alive at the low-rank inference's eigendecomposition (module docstring)
FLOPS_PER_SECOND = 1e10
EVALUATION_SECONDS = 0.03   # a kernel evaluation's own overhead beyond its operations (301 RBF gammas on a 300-node csbm: 52 ms each, measured on 2 busy cores)
ENTRY_COST = 400             # operations per dense entry and layer (exact GCNIIGP on PubMed: ~30 s for 2 x 3.9e8 entries)


def dense_factor(branches: int = 1) -> int:
    """Dense blocks alive at a layer's peak, per entry of its largest block:
    ``BYTES_PER_ENTRY_FACTOR`` without an independent addition; an addition of ``B`` branches
    holds its input, every branch's output until they are summed, and a branch's temporaries
    (a convolution's product and its transpose's copy, the running sum): ``B + 4`` (exact
    GCNIIGP on PubMed, two branches on one square 19,717-node block: six alive at its peak;
    H2GCNGP's readout, seven branches: eleven, 16.5 GB, measured)."""
    return BYTES_PER_ENTRY_FACTOR if branches <= 1 else branches + 4


def low_rank_flops(num_nodes: int, edges: int, width: int, layers: int) -> float:
    """Operations of a low-rank kernel with roots ``width`` wide: per layer the ReLU's Nystrom
    step (``N m^2``) and the convolution (``edges m``), then the ``m x m`` eigendecompositions."""
    return layers * (num_nodes * width * width + edges * width) + 2 * width ** 3


@dataclass(frozen=True)
class Estimate:
    gb: float              # predicted peak resident memory of the process, GiB (on_disk: root files, GiB)
    time_class: str        # seconds, minutes or hours
    detail: str            # what sizes it, e.g. "3,070 landmarks" or "K 2,541 x 644"
    on_disk: bool = False  # compute=dask: ``gb`` is what compute.roots_dir holds at the peak
    seconds: float = 0.0   # predicted seconds of work (at FLOPS_PER_SECOND), of which time_class is the class
    reach_gb: Optional[float] = None   # what the process will hold at this run's peak (now plus the run's work), GiB: what a memory
                                       # limit is checked against; ``gb`` is the larger of it and the peak so far, which an earlier
                                       # job of the same process (a sweep's, a test's) may have set (None: ``gb``)

    @property
    def reach(self) -> float:
        """:attr:`reach_gb`, or ``gb`` where the estimate has no peak of its own apart."""
        return self.gb if self.reach_gb is None else self.reach_gb

    def with_grid(self, grid_gb: float, num: int, seconds: float = 0.0) -> "Estimate":
        """This estimate with a nugget grid's memory in this process (:func:`grid_bytes`) and its
        scoring's ``seconds`` (:func:`grid_seconds`) counted: added to the peak, or told beside the
        root files' size; a usual grid is not mentioned."""
        timed = self.plus(seconds)
        if grid_gb < 0.01:
            return timed
        told = f"a nugget grid of {num:,} values ({size_text(grid_gb * 2**30)})"
        if self.on_disk:
            return replace(timed, detail=f"{self.detail}, {told} in this process")
        return replace(timed, gb=self.gb + grid_gb, reach_gb=self.reach + grid_gb, detail=f"{self.detail}, {told}")

    def with_memory(self, extra_bytes: float, told: str) -> "Estimate":
        """This estimate with ``extra_bytes`` more in this process (told beside the root files' size on Dask)."""
        if extra_bytes < 0.01 * 2**30:
            return self
        told = f"{told} ({size_text(extra_bytes)}{' in this process' if self.on_disk else ''})"
        more = 0 if self.on_disk else extra_bytes / 2**30
        return replace(self, gb=self.gb + more, reach_gb=None if self.on_disk else self.reach + more, detail=f"{self.detail}, {told}")

    def plus(self, seconds: float) -> "Estimate":
        """This estimate with ``seconds`` more work."""
        total = self.seconds + seconds
        return replace(self, seconds=total, time_class=time_class(total * FLOPS_PER_SECOND))

    def times(self, evaluations: int) -> "Estimate":
        """The work of ``evaluations`` kernel evaluations (a search's candidates, then the chosen
        one again) at this estimate's each; the memory is one evaluation's."""
        if evaluations <= 1:
            return self
        total = self.seconds * evaluations
        return replace(self, seconds=total, time_class=time_class(total * FLOPS_PER_SECOND),
                       detail=f"{self.detail}, {evaluations:,} kernel evaluations")

    def long_warning(self, label: str, dataset: str) -> Optional[str]:
        """A warning when the work is expected to take longer than :data:`LONG_SECONDS` (a run its
        memory check refuses is refused before its estimate: the warning never precedes a refusal)."""
        if self.seconds <= LONG_SECONDS:
            return None
        return (f"{label} on {dataset} is estimated to run about {duration_text(self.seconds)} on a machine of "
                f"{FLOPS_PER_SECOND / 1e9:g} GFLOP/s ({self.detail}); Ctrl-C stops it and keeps the finished runs")

    def line(self, label: str, dataset: str) -> str:
        size = f"{_gb(self.gb)} GiB" if self.gb >= 0.1 else size_text(self.gb * 2**30)   # 0.0042 GiB reads as nothing; GiB as the refusals say
        return (f"{label} on {dataset}: ~{size}, {self.detail}, {self.time_class}: about {duration_text(self.seconds)} of work at "
                f"{FLOPS_PER_SECOND / 1e9:g} GFLOP/s (estimate before computing)")


LONG_SECONDS = 300.0   # work estimated past this is a warning before it starts


def duration_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``, ``40 days``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 3 * 86400 else f"{seconds / 86400:,.0f} days"


def _gb(value: float) -> str:
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


FIT_STEP_COST = 1   # fit=mll: one step's kernel, gradient and likelihood, in kernel evaluations: an exact kernel's step (on the training block) costs less than one, a low-rank kernel's under L-BFGS's line search more


def fit_evaluations(steps: int, candidates: int) -> int:
    """The kernel evaluations of ``fit=mll`` for ``candidates`` candidates of ``steps`` steps
    each (the last values scored too)."""
    return FIT_STEP_COST * (int(steps) + 1) * max(int(candidates), 1)


def time_class(flops: float) -> str:
    seconds = flops / FLOPS_PER_SECOND
    return "seconds" if seconds < 60 else "minutes" if seconds < 3600 else "hours"


def gp_estimate(
    *, rss_now: float, peak_now: float = 0.0, num_nodes: int, num_edges: int, num_features: int, n_train: int, n_labelled: int,
    layers: int, bytes_per_entry: int, landmarks: Optional[int] = None, dense_elements: int = 0, branches: int = 1,
    input_nystrom: bool = False, root_width: Optional[int] = None, width: Optional[float] = None,
) -> Estimate:
    """The estimate for one GP run (sizes as in the module docstring; ``rss_now`` and
    ``peak_now`` in bytes). ``branches``: a network with an independent addition holds its
    roots side by side there (GCNII, GraphSAGE: two), so its roots are counted that wide, and
    its dense blocks by :func:`dense_factor`. ``input_nystrom``: a low-rank input layer that is
    a Nystrom root of ``C0`` (RBF, polynomial, or more features than landmarks) also holds the
    cached pairwise statistic and the cross block ``C0[:, a]`` (``2 N m``; measured on the arxiv
    and Reddit stand-ins). ``root_width``: a kernel whose network is linear (no activation:
    ``kernel=composed`` without ``relu``) stays a root of its input's width throughout (the
    features, or their Nystrom root on the landmarks), exact or low rank, and forms no dense
    block: its roots, then the inference on that root (a low-rank one when it is low rank or no
    wider than the training set, else the exact one on ``Q Q[train]^T``). Measured: the arxiv
    stand-in's ComposedGP-X, 1.1 GB where roots as wide as the 1,858 landmarks would hold 4.
    ``width``: low rank, how many landmarks' worth of columns the last root has
    (:func:`~gnngp_cli.kernels.planner.low_rank_width`; default ``branches``): its Gram matrix, its
    eigendecomposition and the inference are that wide, while ``branches`` counts the roots alive
    side by side as the kernel runs (a tangent kernel's ``P`` beside ``Q``, a product's factors)."""
    b = bytes_per_entry
    edges = num_edges + num_nodes
    degree = edges / max(num_nodes, 1)
    if root_width is not None:
        m = root_width
        if landmarks is not None or m <= n_train:   # the low-rank inference on the root
            inference = n_train * m * b + EIGH_SQUARES * m * m * b
        else:                                      # the exact one on root Q[train]^T
            inference = 3 * n_train * n_train * b + n_labelled * n_train * b
        work = 3 * num_nodes * m * b + (2 * num_nodes * landmarks * b if input_nystrom else 0) + inference
        flops = layers * edges * m + 2 * min(m, n_train) ** 3
        detail = f"a root of {m:,} columns (a linear network: no dense block" + (f"; {landmarks:,} landmarks" if landmarks is not None else "") + ")"
    elif landmarks is not None:
        m = landmarks * branches
        w = int(landmarks * (branches if width is None else width))
        root = num_nodes * m * b
        held = 3 * root if num_nodes * m <= ROW_BLOCK_ENTRIES else 2 * root + 4 * ROW_BLOCK_ENTRIES * b
        kernel = held + 3 * w * w * b + num_nodes * num_features * b + (2 * num_nodes * landmarks * b if input_nystrom else 0)
        work = max(kernel, num_nodes * w * b + n_train * w * b + EIGH_SQUARES * w * w * b)
        flops = low_rank_flops(num_nodes, edges, w, layers)
        wide = w / landmarks
        detail = f"{landmarks:,} landmarks" + (f", the last root {wide:.3g} x as wide (an addition, a product or a tangent kernel)" if wide > 1 else "")
    else:
        kernel = dense_factor(branches) * dense_elements * b
        inference = 3 * n_train * n_train * b + n_labelled * n_train * b
        work = kernel + inference
        flops = layers * dense_elements * (ENTRY_COST + 2 * degree) + 4 * n_train ** 3
        detail = f"dense blocks of up to {dense_elements:,} entries"
    total = max(peak_now, rss_now + work)
    seconds = flops / FLOPS_PER_SECOND + EVALUATION_SECONDS
    return Estimate(total / 2**30, time_class(seconds * FLOPS_PER_SECOND), detail, seconds=seconds, reach_gb=(rss_now + work) / 2**30)


GRID_VALUE_BYTES = 20         # per grid value, beyond its two copies in the working dtype: the validation curve and its copies (float64), masks
GRID_CHUNK_TEMPORARIES = 2    # per entry of a chunk's largest product: the weights and the means


def grid_bytes(num: int, bytes_per_entry: int, chunk_entries: int) -> float:
    """What a nugget grid of ``num`` values holds in the process: the grid and the scaled nuggets
    (working dtype), the validation curve (float64), and a chunk's products
    (``chunk_entries``: rows x chunk x outputs, :func:`~gnngp_cli.gp.inference.grid_chunk`).
    Measured on a 60-node csbm (float64, peak RSS 0.26 GB with the default grid): 10^7 values
    0.59 GB peak (estimated 0.95), 10^8 values 3.06 and 3.55 GB (estimated 3.9). On a 300-node
    csbm (float32, 4 classes; the validation curve filled in place): 10^7 values 0.73 GB (estimated
    1.1), 3 10^7 1.18 GB (1.6; 6.4 GB when the curve was joined from a piece per chunk), 10^8
    3.06 GB (3.45; 7.8 GB before)."""
    return num * (2 * bytes_per_entry + GRID_VALUE_BYTES) + GRID_CHUNK_TEMPORARIES * chunk_entries * bytes_per_entry


def grid_seconds(num: int, rows: int, rank: int, outputs: int) -> float:
    """Seconds to score a nugget grid of ``num`` values: per value, the means of ``rows`` nodes
    from weights of rank ``rank`` for each output (``2 rows rank outputs`` operations). Measured
    on a 300-node csbm (30 training nodes, 4 classes): 10^7 values scored in 64 s, estimated 65."""
    return num * 2.0 * rows * rank * max(outputs, 1) / FLOPS_PER_SECOND


MC_OPERATIONS = 10   # per draw, class and node at each temperature: the shift, the exp, the sums and the label's entry


def monte_carlo_bytes(samples: int, classes: int, rows: int, chunk_entries: int) -> float:
    """Peak bytes of Monte-Carlo class probabilities (:mod:`~gnngp_cli.gp.probabilities`): the
    shared ``samples x classes`` draws (float64) and, for a chunk of rows, their shifted draws,
    a buffer of the same size and the label's own (``classes x rows x samples``, the rows as many
    as keep a chunk within ``chunk_entries``, at least one)."""
    per_row = samples * classes
    chunk = per_row * min(max(rows, 1), max(1, chunk_entries // max(per_row, 1)))
    return 8.0 * (per_row + 2 * chunk + chunk / max(classes, 1))


def monte_carlo_seconds(samples: int, classes: int, rows: int, passes: int) -> float:
    """Seconds of Monte-Carlo probabilities for ``rows`` nodes over ``passes`` temperatures."""
    return MC_OPERATIONS * float(samples) * classes * rows * passes / FLOPS_PER_SECOND


TASK_SECONDS = 0.001           # Dask's own overhead per task (its documentation: about a millisecond)
TASKS_PER_BLOCK_LAYER = 4      # a row block's tasks per layer: the ReLU's, the product's, the root's write and read
SOURCE_READ_SECONDS = 0.004    # an A Q task's read of one source block's rows (the 3,000-node csbm in 100 row blocks against 10: 113 s more, 2 layers, measured on 2 busy cores)


def row_block_seconds(num_blocks: int, source_blocks: float, layers: int) -> float:
    """Seconds a Dask evaluation spends beyond its operations: each row block's tasks per layer
    and, per layer, each output block's reads of the source blocks its entries name (a run in
    many small blocks: ``partition.rows=1`` on 3,000 nodes, 66,000 reads a layer, ran past 300 s)."""
    return num_blocks * (layers + 1) * TASKS_PER_BLOCK_LAYER * TASK_SECONDS + layers * num_blocks * source_blocks * SOURCE_READ_SECONDS


def size_text(num_bytes: float) -> str:
    """``9.6 GiB``, ``4.1 MiB``, ``1.0 KiB``: sizes a reader can compare."""
    if num_bytes >= 2**30:
        return f"{num_bytes / 2**30:.1f} GiB"
    if num_bytes >= 2**20:
        return f"{num_bytes / 2**20:.1f} MiB"
    return f"{num_bytes / 2**10:.1f} KiB" if num_bytes >= 2**10 or num_bytes <= 0 else f"{num_bytes:.3g} bytes"   # max_memory_gb=1e-9: not "0.0 KiB"


def rowblock_estimate(
    *, num_nodes: int, num_edges: int, num_features: int, landmarks: int, layers: int, bytes_per_entry: int, rows: int,
    task_bytes: float, branches: int = 1, num_blocks: int = 1, source_blocks: float = 1.0,
) -> Estimate:
    """The estimate for a GP run on row blocks of a Dask cluster (``compute=dask``): ``gb`` is
    what the run writes to ``compute.roots_dir`` at its peak, the roots of one evaluation as
    row-block files (see :mod:`gnngp_cli.backends.rowblocks.root_files`): each layer's convolution operand and
    output, ``N x (min(d, m) + layers + 1)`` for the first layer and ``N x (m + layers + 1)``
    after it. The workers hold one task's blocks each (``task_bytes``, told, not added).
    ``branches``: at an independent addition the roots are that many side by side."""
    b = bytes_per_entry
    m = landmarks
    width = (m + layers + 1) * branches
    root = num_nodes * width * b
    first = num_nodes * (min(num_features, m) + layers + 1) * branches * b
    held = 2 * first + 2 * (layers - 1) * root
    edges = num_edges + num_nodes
    flops = low_rank_flops(num_nodes, edges, m, layers)
    detail = f"of root files at the peak (compute.roots_dir), {m:,} landmarks, roots of {num_nodes:,} x {width} ({size_text(root)} each) " \
             f"in row blocks of {rows:,} nodes, up to {size_text(task_bytes)} per task in a worker's memory"
    seconds = flops / FLOPS_PER_SECOND + EVALUATION_SECONDS + row_block_seconds(num_blocks, source_blocks, layers)
    if seconds > LONG_SECONDS and num_blocks > 1:
        detail += f", {num_blocks:,} row blocks each reading {source_blocks:.3g} source blocks per layer"
    return Estimate(held / 2**30, time_class(seconds * FLOPS_PER_SECOND), detail, on_disk=True, seconds=seconds)   # the tasks' overhead eats what extra threads give on a few cores



def active_bytes(num_nodes: int, width: int, bytes_per_entry: int, exact: bool, labels: int = 0, squares: bool = False,
                 working: int = 0) -> float:
    """What an active run holds (:mod:`gnngp_cli.gp.updates`): the prior, a dense ``n x n``
    kernel (``exact``) or a root ``Q`` (``n x m``, ``m`` = ``width``), and the posterior's ``S``
    (``n`` by the ``labels``, allocated once); with ``squares`` (V-optimality) on a root, its
    scores' start too (the product ``Q (Q^T Q)``, ``n x m``, and ``Q^T Q``); and the float64
    entries a strategy's step works in (``working``: eer's blocks). The candidate scores and the
    posterior's mean and variance are a few ``n``-vectors. The exact kernel's own computation is
    checked before it starts (``check_exact_memory``)."""
    entries = num_nodes * max(labels, 16)
    if exact:
        entries += num_nodes * num_nodes
    else:
        entries += num_nodes * width * (2 if squares else 1) + (width * width if squares else 0)
    return float(entries) * bytes_per_entry + 8.0 * working
