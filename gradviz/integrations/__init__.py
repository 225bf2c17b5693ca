"""Callbacks that record a run made by a trainer: one line in the trainer's callbacks.

- ``gradviz.integrations.lightning.GradvizCallback`` for Lightning (``pip install
  "gradviz[lightning]"``; the ``lightning`` package, or ``pytorch_lightning`` where only that
  one is installed);
- ``gradviz.integrations.transformers.GradvizCallback`` for Hugging Face's ``Trainer``
  (``pip install "gradviz[transformers]"``).

Each records the model's gradients (``gradviz.watch``) every ``every`` optimizer steps and
every step with a non-finite gradient, with the loss, the learning rate and the trainer's
other logged numbers as scalars at every step, on every rank of a distributed run.
Neither imports its trainer until it is used.
"""
