"""Analysis over many runs: the same detectors and triage, fanned out per cassette.

Engine-independent by construction:

* :mod:`.rows`: the pure per-cassette function (bytes -> one row: verdict, findings, the
  run's triage facts) and the batch function engines map;
* :mod:`.engine`: :class:`~.engine.LocalEngine` (this process or a process pool) and
  :class:`~.engine.DaskEngine` (a ``distributed.LocalCluster`` or an existing cluster), both
  only mapping that function over batches and returning results in order;
* :mod:`.pipeline`: paths, directories and store URLs -> cassette items -> rows;
* :mod:`.parquet`: rows as a Parquet table (pyarrow), written as they come, read back by
  ``cluster`` and ``dashboard``.

``spoolproxy detect``/``cluster`` use this whenever ``--engine dask``, ``--parquet`` or a
store URL is given.  Dask, distributed, fsspec, s3fs and pyarrow come with
``pip install 'spoolproxy[scale]'``.  See docs/scaling.md.
"""
