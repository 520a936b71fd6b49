"""The job: what one ``gnngp run`` computes, written once for every backend. It receives the
job's spec (:func:`gnngp_cli.config.parse`) and orchestrates; the GP's algebra is
:mod:`gnngp_cli.gp`.

- :mod:`.gp_job`: the GP job (landmarks, the choices made on validation, the fit, inference, rows),
  over a :class:`~.backend_interface.Backend` that evaluates kernels and reduces statistics;
- :mod:`.gnn_job`: the GNN baselines' job;
- :mod:`.loading`: a dataset loaded onto its device; :mod:`.landmarks`, :mod:`.estimate`: what
  every job shares (its rows: :mod:`gnngp_cli.results.rows`).

The backends (:mod:`gnngp_cli.backends`) sit above this package and are handed to it; nothing
here imports them.
"""
