"""Recordings: gradient statistics of a training loop (``gradviz.watch``) or a lab run
(``gradviz fit --record``), on zarr v3, readable while written and after a crash.

``Recorder``/``watch`` write; ``Reader`` (with ``RankStream`` per rank) reads.
"""
