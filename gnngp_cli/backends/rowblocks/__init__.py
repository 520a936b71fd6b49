"""``compute=dask``: low-rank kernels and their GP on row blocks of a Dask cluster.

- :mod:`.graph`: a sharded graph as Dask collections, and the blocked product ``A Q``;
- :mod:`.roots`: the row-block backing of the blocks' root operations;
- :mod:`.store`: roots as row-block files that every worker reads;
- :mod:`.posterior`: the GP posterior from tree reductions;
- :mod:`.cluster`: the cluster (local, an existing scheduler, or SLURM);
- :mod:`.run`: the job.
"""
