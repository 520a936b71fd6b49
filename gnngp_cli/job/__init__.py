"""The job: what one ``gnngp run`` computes, written once for every backend.

- :mod:`.gp`: the GP job (landmarks, the choices made on validation, the fit, inference, rows),
  over a :class:`~.backend.Backend` that evaluates kernels and reduces statistics;
- :mod:`.inference`: the posterior strategies and the metrics, from reduced statistics;
- :mod:`.fit`: hyperparameters by marginal likelihood (``fit=mll``);
- :mod:`.gnn`: the GNN baselines' job;
- :mod:`.loading`: a dataset loaded onto its device; :mod:`.landmarks`, :mod:`.estimate`,
  :mod:`.rows`: what every job shares.

The backends (:mod:`gnngp_cli.backends`) sit above this package and are handed to it; nothing
here imports them.
"""
