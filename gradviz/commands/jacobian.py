"""`gradviz jacobian`: per-input Jacobians of a network over a batch, headless.

Inputs may have any shape (B, *in_shape): an NPY file is taken as it is, random inputs take
``--input-shape 3,32,32``. Where the per-sample Jacobian has at most 1,000,000 entries it is
computed, (B, m, *in_shape); otherwise (or with ``--output K``) the saliency: the gradient of
one output per sample, (B, *in_shape). NaN or Inf weights are reported before computing.

Prints a short summary; with ``--json`` stdout is one JSON object on one line instead: ``kind``
("jacobian" or "saliency"), ``shape`` (of the array ``--out`` writes), ``batch``, ``out_dim``,
``method`` (the one that ran), ``reason``, ``seconds`` (the computation alone, the first in
this process), ``dtype``, ``device``, ``nonfinite_weights``, ``assumptions`` (sentences:
what gradviz assumed to rebuild a model file, as ``gradviz inspect`` and the app's model
panel state them), ``runs_as`` for a model file gradviz rebuilt (how it ran: "Rebuilt from
torch.nn classes, no code from the file."); for (B, n) Jacobians also ``in_dim``,
``constant_across_batch`` and, with ``--full``, ``max_off_block``; otherwise ``in_shape``
and ``norms`` (per sample) and, for saliency, ``output`` (per sample) and
``output_explained``.
"""

from __future__ import annotations

import numpy as np

from gradviz.commands.output import print_json, say
from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import (
    check_batch_size,
    load_npy_samples,
    parse_sample_shape,
    random_batch,
)
from gradviz.core.lab.pointsets import FILE_PREFIX, load_points
from gradviz.core.modelio.limits import escaped
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import MAX_FULL_BATCH
from gradviz.core.settings.program_limits import ProgramLimits
from gradviz.core.settings.table import from_arguments


def run(args) -> int:
    from gradviz.core.modelio.loading import paused_gc

    # A model of 10,000 layers is some 10^6 objects that the cyclic collector would walk
    # again and again while they are built and run; none of them is garbage before the end.
    with paused_gc():
        return _run(args)


def _run(args) -> int:
    spec_or_none, source = _model_source(args)
    points = _inputs(args)
    in_shape = _input_shape(args.input_shape)
    if args.full and points is not None and len(points) > MAX_FULL_BATCH:
        raise GradvizError(_full_too_big(len(points)))
    if args.full and points is None and args.batch > MAX_FULL_BATCH:
        raise GradvizError(_full_too_big(args.batch))

    loaded = None
    if source is not None:
        from gradviz.core.modelio import load_model

        # Every runnable format; TorchScript, .pt2 and --model-class only with --trust. A
        # file is judged on what it declares before torch is imported (2-4 s, 220 MB).
        loaded = load_model(
            source,
            trust=args.trust,
            activation=args.activation,
            in_dim=args.in_dim,
            assume_sequential=args.assume_sequential,
            model_class=args.model_class,
            model_args=args.model_args,
            limits=from_arguments(ProgramLimits, args),
        )
        if loaded.info.activation_from_caller and args.activation is None:
            from gradviz.core.modelio.readers import activation_refusal

            raise GradvizError(activation_refusal(loaded.info))

    import torch

    from gradviz.core.common.devices import resolve_device

    device = resolve_device(args.device)
    dtype = getattr(torch, args.dtype)
    nonfinite: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    if loaded is None:
        spec, model = spec_or_none, spec_or_none.build(seed=args.seed, dtype=dtype)
        in_dim, label, parameters = spec.in_dim, str(spec), spec.parameter_count
    else:
        assumptions = loaded.info.assumptions
        spec, model = loaded.spec, _moved(loaded.module, dtype=dtype)
        in_dim = loaded.info.in_dim or args.in_dim
        label = loaded.info.spec or (
            str(spec) if spec is not None else f"{loaded.info.format} model {source}"
        )
        label = _short_label(escaped(label))
        parameters = loaded.info.parameters
        nonfinite = loaded.info.nonfinite_weights
        if loaded.info.in_shape is None and loaded.info.in_dim is None:
            assumptions += _shape_source(in_shape, points)
        in_shape = in_shape or loaded.info.in_shape
    if loaded is not None and device.type != "cpu" and _runs_in_own_process(loaded.module):
        device = torch.device("cpu")
        assumptions += (
            f"The trusted program ran on the CPU, in the process of its own that bounds its "
            f"time and memory (--device {args.device} applies to gradviz's own networks).",
        )
    model = _moved(model, device=device)
    out_dim = loaded.info.out_dim if loaded is not None and loaded.spec is not None else None

    inputs = _input_tensor(args, points, in_shape, in_dim, source, dtype).to(device)
    if nonfinite:  # said before computing: every gradient below may be NaN because of them
        say(args, f"NaN or Inf in weights: {', '.join(nonfinite)}")
    if inputs.ndim == 2 and args.output is None and _small(model, inputs, out_dim):
        summary = _jacobians(args, model, inputs, device, label, parameters)
    else:
        if args.full:
            raise GradvizError("--full needs inputs of shape (B, n) and a per-sample Jacobian.")
        summary = _gradients(args, model, inputs, device, label, parameters)
    summary["nonfinite_weights"] = list(nonfinite)
    # What the result rests on, in the sentences the app's model panel shows.
    summary["assumptions"] = list(assumptions)
    if loaded is not None and loaded.info.runs_as:
        summary["runs_as"] = loaded.info.runs_as
    for sentence in assumptions:
        say(args, f"assumed: {escaped(sentence)}")
    if args.json:
        print_json(summary)
    return 0


def _shape_source(in_shape, points) -> tuple[str, ...]:
    """Where the input shape of a model whose file declares none came from, in the words
    the app's model panel uses for the shape the user types there."""
    if in_shape is not None:
        return (f"The input shape {tuple(in_shape)} was given by you (--input-shape).",)
    if points is not None:
        shape = tuple(int(size) for size in points.shape[1:])
        return (f"The input shape {shape} was taken from the inputs (--inputs).",)
    return ()


def _runs_in_own_process(module) -> bool:
    from gradviz.core.modelio.remote_program import RemoteProgram

    return isinstance(module, RemoteProgram)


def _short_label(label: str, chars: int = 200) -> str:
    """A network's text, cut where it is long (10,000 layers print as 600 KB of JSON)."""
    return label if len(label) <= chars else label[: chars - 1] + "…"


def _moved(model, *, dtype=None, device=None):
    """``model.to(dtype)`` / ``.to(device)``, skipped where every parameter and buffer is
    there already (``to`` visits every module: 0.2 s for 20,000 of them)."""
    tensors = [*model.parameters(), *model.buffers()]
    if all(
        (dtype is None or not t.is_floating_point() or t.dtype == dtype)
        and (device is None or t.device == device)
        for t in tensors
    ):
        return model
    return model.to(dtype) if device is None else model.to(device)


def _small(model, inputs, out_dim: int | None = None) -> bool:
    """Whether the (m, n) per-sample Jacobian is within MAX_JACOBIAN_ENTRIES; ``out_dim``
    is m where the model's spec gives it (a forward pass of 10,000 layers costs 0.3 s)."""
    import torch

    from gradviz.core.explorer.input_gradients import _outputs
    from gradviz.core.modelio.limits import MAX_JACOBIAN_ENTRIES

    m = out_dim
    if m is None:
        with torch.no_grad():
            m = _outputs(model, inputs).shape[1]
    return m * inputs.shape[1] <= MAX_JACOBIAN_ENTRIES


def _input_tensor(args, points, in_shape, in_dim, source, dtype):
    """(B, *in_shape) inputs: the --inputs file as is, or a random --batch."""
    import torch

    if points is None:
        shape = in_shape or ((in_dim,) if in_dim is not None else None)
        if shape is None:
            raise GradvizError(
                f"{source} does not declare its input shape; give it with --input-shape "
                "(e.g. 3,32,32), --in-dim N, or give the inputs with --inputs file:PATH."
            )
        # The explorer's batch for this seed (one construction, in core).
        return torch.as_tensor(random_batch(args.batch, shape, args.seed), dtype=dtype)
    if points.ndim == 2 and in_dim is not None and points.shape[1] != in_dim:
        raise GradvizError(
            f"The inputs have {points.shape[1]} columns but the model takes {in_dim} "
            "inputs; give one row per sample with one column per model input."
        )
    return torch.from_numpy(np.ascontiguousarray(points)).to(dtype)


def _jacobians(args, model, inputs, device, label, parameters) -> dict:
    """(B, n) inputs: per-input Jacobians (B, m, n), as before."""
    import time

    from gradviz.core.nets import jacobians

    _sync(device)
    start = time.perf_counter()
    result = jacobians.compute_jacobians(model, inputs, args.method)
    _sync(device)
    seconds = time.perf_counter() - start

    jac = result.jacobians
    batch, m, n = jac.shape
    stats = jacobians.batch_statistics(jac)
    summary = {
        "kind": "jacobian",
        "shape": [batch, m, n],
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

    say(args, f"network: {label}  ({parameters:,} parameters, {args.dtype}, {device})")
    say(
        args,
        f"J: ({batch}, {m}, {n}) by {result.method} in {seconds * 1e3:.2f} ms: {result.reason}",
    )
    say(args, f"constant across this batch: {'yes' if stats.constant_across_batch else 'no'}")
    if args.full:
        say(args, f"largest entry outside the diagonal blocks: {summary['max_off_block']:.3g}")
    if args.out:
        say(args, f"wrote J ({batch}, {m}, {n}) float32 to {args.out}")
    return summary


def _gradients(args, model, inputs, device, label, parameters) -> dict:
    """Inputs of any shape: per-sample Jacobians (B, m, *in_shape) or saliency (B, *in_shape)."""
    import time

    from gradviz.core.explorer.input_gradients import SALIENCY, input_gradients

    _sync(device)
    start = time.perf_counter()
    result = input_gradients(model, inputs, output=args.output, method=args.method)
    _sync(device)
    seconds = time.perf_counter() - start
    shape = list(result.values.shape)
    summary = {
        "kind": result.kind,
        "shape": shape,
        "batch": shape[0],
        "in_shape": list(inputs.shape[1:]),
        "out_dim": int(result.outputs.shape[1]),
        "method": result.method,
        "reason": result.reason,
        "seconds": seconds,
        "norms": [float(v) for v in result.norms],
        "dtype": args.dtype,
        "device": str(device),
    }
    name = "J" if result.kind != SALIENCY else "saliency"
    say(args, f"network: {label}  ({parameters:,} parameters, {args.dtype}, {device})")
    say(args, f"{name}: {tuple(shape)} in {seconds * 1e3:.2f} ms: {result.reason}")
    if result.kind == SALIENCY:
        explained = [int(k) for k in result.explained]
        summary["output"] = explained
        summary["output_explained"] = (
            f"output {args.output}" if args.output is not None else "each sample's largest output"
        )
        more = " ..." if len(explained) > 20 else ""
        say(args, f"explained outputs (per sample): {explained[:20]}{more}")
    if args.out:
        _save_npy(args.out, result.values.detach().cpu().numpy().astype(np.float32))
        say(args, f"wrote {name} {tuple(shape)} float32 to {args.out}")
    return summary


def _input_shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    shape = parse_sample_shape(text, "--input-shape")
    if shape is None:
        raise GradvizError("--input-shape takes positive sizes separated by commas (e.g. 3,32,32).")
    return shape


def _model_source(args) -> tuple[NetworkSpec | None, str | None]:
    """(spec, None) for --net, (None, path) for --model."""
    if args.model is not None:
        return None, args.model
    if args.model_class is not None or args.assume_sequential:
        raise GradvizError("--model-class and --assume-sequential apply to --model PATH only.")
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
    """The --inputs samples: a CSV as (B, n) rows, an NPY file of any shape (B, *in_shape)
    as it is; None for a random --batch."""
    if args.inputs is None:
        check_batch_size(args.batch)
        return None
    path = args.inputs[len(FILE_PREFIX) :]
    if not args.inputs.startswith(FILE_PREFIX) or not path:
        raise GradvizError(f"--inputs takes file:PATH (a CSV or NPY file), not {args.inputs!r}.")
    array = load_npy_samples(path)
    if array is not None:
        return array
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
