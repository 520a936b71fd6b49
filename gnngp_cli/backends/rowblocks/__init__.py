"""``compute=dask``: low-rank kernels and their GP on row blocks of a Dask cluster.

- :mod:`.sharded_graph`: a sharded graph as Dask collections, and the blocked product ``A Q``;
- :mod:`.dask_roots`: the row-block backing of the blocks' root operations;
- :mod:`.root_files`: roots as row-block files that every worker reads;
- :mod:`.cluster`: the cluster (local, an existing scheduler, or SLURM);
- :mod:`.dask_backend`: the backend the GP job runs over (evaluations and statistics reduced over
  the row blocks; the job itself is :mod:`gnngp_cli.job.gp_job`, the same for every backend).
"""
