"""`gradviz jacobian`: per-input Jacobians of a network over a batch, headless.

Prints a short summary; with ``--json`` the last line of stdout is one JSON object:
``batch``, ``in_dim``, ``out_dim``, ``method`` (the one that ran), ``reason``, ``seconds`` (the
Jacobian computation alone, the first in this process), ``constant_across_batch``, ``dtype``,
``device`` and, with ``--full``, ``max_off_block``.
"""

from __future__ import annotations

import json

import numpy as np

from gradviz.core.config import MAX_FULL_BATCH
from gradviz.core.errors import GradvizError
from gradviz.core.explore_batches import check_batch_size, random_batch
from gradviz.core.networks import NetworkSpec
from gradviz.core.pointsets import FILE_PREFIX, load_points


def run(args) -> int:
    spec_or_none, source = _model_source(args)
    points = _inputs(args)
    if args.full and points is not None and len(points) > MAX_FULL_BATCH:
        raise GradvizError(_full_too_big(len(points)))
    if args.full and points is None and args.batch > MAX_FULL_BATCH:
        raise GradvizError(_full_too_big(args.batch))

    import time

    import torch

    from gradviz.core import jacobians
    from gradviz.core.devices import resolve_device
    from gradviz.core.modelio import load_model

    device = resolve_device(args.device)
    dtype = getattr(torch, args.dtype)
    if spec_or_none is not None:
        spec, model = spec_or_none, spec_or_none.build(seed=args.seed, dtype=dtype)
        in_dim, label, parameters = spec.in_dim, str(spec), spec.parameter_count
    else:
        # Every runnable format; TorchScript and .pt2 only with --trust.
        loaded = load_model(
            source, trust=args.trust, activation=args.activation, in_dim=args.in_dim
        )
        spec, model = loaded.spec, loaded.module.to(dtype)
        in_dim = loaded.info.in_dim or (points.shape[1] if points is not None else None)
        label = str(spec) if spec is not None else f"{loaded.info.format} program {source}"
        parameters = loaded.info.parameters
        if in_dim is None:
            raise GradvizError(
                f"{source} does not declare its input width; give it with --in-dim N or "
                "give the inputs with --inputs file:PATH."
            )
    model = model.to(device)

    if points is None:  # the explorer's batch for this seed (one construction, in core)
        inputs = torch.as_tensor(random_batch(args.batch, in_dim, args.seed), dtype=dtype)
    else:
        if points.shape[1] != in_dim:
            raise GradvizError(
                f"The inputs have {points.shape[1]} columns but the model takes {in_dim} "
                "inputs; give one row per sample with one column per model input."
            )
        inputs = torch.from_numpy(points).to(dtype)
    inputs = inputs.to(device)

    _sync(device)
    start = time.perf_counter()
    result = jacobians.compute_jacobians(model, inputs, args.method)
    _sync(device)
    seconds = time.perf_counter() - start

    jac = result.jacobians
    batch, m, n = jac.shape
    stats = jacobians.batch_statistics(jac)
    summary = {
        "batch": batch,
        "in_dim": n,
        "out_dim": m,
        "method": result.method,
        "reason": result.reason,
        "seconds": seconds,
        "constant_across_batch": stats.constant_across_batch,
        "dtype": args.dtype,
        "device": str(device),
    }
    if args.full:
        full = jacobians.full_batch_jacobian(model, inputs)
        summary["max_off_block"] = jacobians.max_off_block(full, batch, m, n)
    if args.out:
        _save_npy(args.out, jac.detach().cpu().numpy().astype(np.float32))

    print(f"network: {label}  ({parameters:,} parameters, {args.dtype}, {device})")
    print(f"J: ({batch}, {m}, {n}) by {result.method} in {seconds * 1e3:.2f} ms: {result.reason}")
    print(f"constant across this batch: {'yes' if stats.constant_across_batch else 'no'}")
    if args.full:
        print(f"largest entry outside the diagonal blocks: {summary['max_off_block']:.3g}")
    if args.out:
        print(f"wrote J ({batch}, {m}, {n}) float32 to {args.out}")
    if args.json:
        print(json.dumps(summary, separators=(",", ":")))
    return 0


def _model_source(args) -> tuple[NetworkSpec | None, str | None]:
    """(spec, None) for --net, (None, path) for --model."""
    if args.model is not None:
        return None, args.model
    spec = NetworkSpec.parse(args.net)
    if args.activation is not None and ":" not in args.net and not args.net.strip().startswith("{"):
        widths = [spec.in_dim] + [lin.out_features for lin in spec.linears]
        spec = NetworkSpec.from_widths(widths, args.activation)
    return spec, None


def _full_too_big(batch: int) -> str:
    return (
        f"--full builds the (B*m, B*n) batch Jacobian, which is limited to B <= "
        f"{MAX_FULL_BATCH}; this batch has B = {batch}: use a smaller batch or drop --full."
    )


def _inputs(args) -> np.ndarray | None:
    """The --inputs rows as (B, n) float64, or None for a random --batch."""
    if args.inputs is None:
        check_batch_size(args.batch)
        return None
    path = args.inputs[len(FILE_PREFIX) :]
    if not args.inputs.startswith(FILE_PREFIX) or not path:
        raise GradvizError(f"--inputs takes file:PATH (a CSV or NPY file), not {args.inputs!r}.")
    # One sample per row; a single sample is a batch too.
    return load_points(path, min_points=1)


def _save_npy(path: str, array: np.ndarray) -> None:
    """Write exactly to ``path`` (np.save given a name would append .npy to other names)."""
    try:
        with open(path, "wb") as handle:
            np.save(handle, array, allow_pickle=False)
    except OSError as exc:
        raise GradvizError(f"Could not write {path!r}: {exc.strerror}.") from None


def _sync(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)
