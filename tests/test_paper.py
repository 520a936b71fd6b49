"""The GNNGP paper's numbers (Tables 4 and 5) on the mirrored data, within 0.002."""
import pytest

from gnngp_cli.api import run

# (dataset, kernel, paper's test metric): accuracy, or R^2 on chameleon and squirrel
PAPER = [
    # Table 4, GCNGP and GCNGP-X (all training nodes as landmarks)
    ("cora", "gcngp", 0.8280), ("citeseer", "gcngp", 0.7090), ("pubmed", "gcngp", 0.7960),
    ("chameleon", "gcngp", 0.6720), ("squirrel", "gcngp", 0.4926),
    ("cora", "gcngp_x", 0.7980), ("citeseer", "gcngp_x", 0.7080), ("pubmed", "gcngp_x", 0.7810),
    ("chameleon", "gcngp_x", 0.6852), ("squirrel", "gcngp_x", 0.4998),
    # Table 5, the other GNN kernels on PubMed
    ("pubmed", "gcn2gp", 0.7840), ("pubmed", "gingp", 0.7690), ("pubmed", "sagegp", 0.7900),
    # Table 4, the GGP and RBF baselines (RBF on Cora and CiteSeer: see known_deviations.csv)
    ("cora", "ggp", 0.7850), ("citeseer", "ggp", 0.7060), ("pubmed", "ggp", 0.7820),
    ("chameleon", "ggp", 0.5280), ("squirrel", "ggp", 0.2440),
    ("cora", "ggp_x", 0.7410), ("citeseer", "ggp_x", 0.6470), ("pubmed", "ggp_x", 0.7380),
    ("chameleon", "ggp_x", 0.5311), ("squirrel", "ggp_x", 0.2251),
    ("pubmed", "rbf", 0.7360), ("chameleon", "rbf", 0.5554),
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
