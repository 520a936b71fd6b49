"""The GNNGP paper's numbers (Tables 4 and 5) on the mirrored data, within 0.002."""
import pytest

from gnngp_cli.api import run

# (dataset, kernel, paper's test metric): accuracy, or R^2 on chameleon and squirrel. Every GP cell
# of Tables 4 and 5 on the mirrored datasets is also checked by the CI reproduction job
# (scripts/reproduce_ci.sh: the sweeps, then `gnngp report --check-paper 0.002`); these are the
# Table 4 GCNGP and GCNGP-X cells, run here one by one so that a failure names its cell. The other
# cells ran here too until 2026-11-28, twice over with the reproduction job (about 2 minutes of CI).
PAPER = [
    ("cora", "gcngp", 0.8280), ("citeseer", "gcngp", 0.7090), ("pubmed", "gcngp", 0.7960),
    ("chameleon", "gcngp", 0.6720), ("squirrel", "gcngp", 0.4926),
    ("cora", "gcngp_x", 0.7980), ("citeseer", "gcngp_x", 0.7080), ("pubmed", "gcngp_x", 0.7810),
    ("chameleon", "gcngp_x", 0.6852), ("squirrel", "gcngp_x", 0.4998),
]


@pytest.mark.paper
@pytest.mark.parametrize("dataset, kernel, expected", PAPER)
def test_kernel_reproduces_the_paper(dataset, kernel, expected, data_overrides):
    row = run([f"dataset={dataset}", f"kernel={kernel}", *data_overrides])[0]
    assert round(abs(row["test"] - expected), 4) <= 0.002, row


# The paper's exact RBF values are the kernel at the first grid value gamma = 0.01, not at the
# validation-chosen gamma (see gnngp_cli/paper/known_deviations.csv).
RBF_AT_FIRST_GAMMA = [("cora", 0.5860), ("citeseer", 0.6120), ("pubmed", 0.7360), ("chameleon", 0.5554), ("squirrel", 0.3187)]


@pytest.mark.paper
@pytest.mark.parametrize("dataset, expected", RBF_AT_FIRST_GAMMA)
def test_paper_rbf_values_are_the_first_gamma_of_the_grid(dataset, expected, data_overrides):
    row = run([f"dataset={dataset}", "kernel=rbf", "kernel.gamma_search=false", "kernel.base.gamma=0.01", *data_overrides])[0]
    assert round(abs(row["test"] - expected), 4) <= 0.002, row
