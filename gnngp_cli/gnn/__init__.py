"""GNN baselines trained with PyTorch Geometric layers, timed like the GPs.

``gcn`` (``GCNConv`` on the shared normalised adjacency), ``gcn2`` (linear in, ``GCN2Conv``
layers, linear out), ``gin`` (``GINConv`` with a 2-layer MLP, linear head) and ``sage``
(``SAGEConv``, mean aggregation); ``gat`` (``GATConv``, 8 heads in hidden layers); ``sgc`` (``SGConv``) and ``sign`` (the ``SIGN``
transform and an MLP), which read the graph once, in a precomputation timed apart. GIN is one aggregation followed by an L-layer MLP,
the network whose infinite-width kernel is GINGP. Full-batch training by default; mini-batch training samples
neighbourhoods (a uniform sampler in plain PyTorch over the CSR adjacency) and then infers
layer by layer over all nodes. The test metric is read at the epoch with the best validation
metric.
"""
from .baselines import GNNS, TRAINING_DEFAULTS, GNNEntry, register_gnn
from .models import GAT, GCN, GIN, GNN, SAGE, GCN2
from .heterophily_networks import GPRGNN, H2GCN
from .precomputed import SGC, SIGN
from .training import Graph, GNNResult, GradientDescent, layerwise_inference, train_gnn

__all__ = ["GNNS", "TRAINING_DEFAULTS", "GNNEntry", "register_gnn", "GNN", "GAT", "GCN", "GIN", "SAGE", "GCN2", "GPRGNN", "H2GCN", "SGC", "SIGN",
           "Graph", "GNNResult", "GradientDescent", "layerwise_inference", "train_gnn"]
