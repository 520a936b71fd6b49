"""The GNNGP paper's numbers on the mirrored data, within 0.002: what the CI reproduction job does not run.

Every GP cell of Tables 4 and 5 on the mirrored datasets (34 cells: Table 4's GCNGP, GCNGP-X,
RBF, RBF-X, GGP and GGP-X on Cora, CiteSeer, PubMed, chameleon and squirrel; Table 5's PubMed GP
rows) is computed once in CI, by the reproduction job (``scripts/reproduce_ci.sh``: the sweeps of
``experiment=table4`` and ``table5``, then ``gnngp report --check-paper 0.002``, which fails on a
cell off by more than 0.002 and names it). Table 4's GCNGP and GCNGP-X cells were also run here,
one by one, until the test pyramid of issue 45: the same ten cells computed twice in every CI run.
``bash scripts/reproduce_ci.sh`` checks them outside CI too."""
import pytest

from gnngp_cli.api import run

# The paper's exact RBF values are the kernel at the first grid value gamma = 0.01, not at the
# validation-chosen gamma (see gnngp_cli/paper/known_deviations.csv).
RBF_AT_FIRST_GAMMA = [("cora", 0.5860), ("citeseer", 0.6120), ("pubmed", 0.7360), ("chameleon", 0.5554), ("squirrel", 0.3187)]


@pytest.mark.paper
@pytest.mark.parametrize("dataset, expected", RBF_AT_FIRST_GAMMA)
def test_paper_rbf_values_are_the_first_gamma_of_the_grid(dataset, expected, data_overrides):
    row = run([f"dataset={dataset}", "kernel=rbf", "kernel.gamma_search=false", "kernel.base.gamma=0.01", *data_overrides])[0]
    assert round(abs(row["test"] - expected), 4) <= 0.002, row
