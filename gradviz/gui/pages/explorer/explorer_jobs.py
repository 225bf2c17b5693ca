"""From the explorer's settings to an ``ExplorerJob`` for its worker.

A job is the batch (an image file's samples are read here), the settings every job
shares, and the network: either one set from outside (an ``ExploredNetwork``) or the spec
typed into the settings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import InputSettings
from gradviz.core.explorer.jobs import ExplorerJob
from gradviz.core.nets.networks import NetworkSpec
from gradviz.gui.pages.explorer.image_inputs import read_image
from gradviz.gui.pages.explorer.settings import ExplorerSettings


@dataclass(frozen=True)
class ExploredNetwork:
    """A network set with ``ExplorerTab.set_network``: ``module`` is the tab's own deep
    copy, mapping (B, in_dim) to (B, out_dim), or (B, *in_shape) to (B, ...) when
    ``in_shape`` is given; ``label`` names it; ``spec`` when known."""

    module: Any
    label: str
    in_dim: int
    out_dim: int
    spec: NetworkSpec | None = None
    in_shape: tuple[int, ...] | None = None


def read_inputs(
    settings: ExplorerSettings, in_shape: tuple[int, ...] | None
) -> InputSettings | None:
    """The batch the settings describe, an image file's samples read to ``in_shape``;
    None when they are invalid (the problem is shown under the inputs)."""
    try:
        inputs = settings.input_settings()
        if inputs.kind == "image":
            inputs = replace(inputs, samples=read_image(inputs.path, in_shape))
    except GradvizError as exc:
        settings.show_inputs_problem(str(exc))
        return None
    settings.show_inputs_problem("")
    return inputs


def network_job(
    network: ExploredNetwork, settings: ExplorerSettings, inputs: InputSettings
) -> ExplorerJob:
    """The job that explores a network set from outside."""
    return ExplorerJob(
        label=network.label,
        in_dim=network.in_dim,
        out_dim=network.out_dim,
        module=network.module,
        in_shape=network.in_shape,
        **_shared_fields(settings, inputs),
    )


def spec_job(spec: NetworkSpec, settings: ExplorerSettings, inputs: InputSettings) -> ExplorerJob:
    """The job that explores a typed spec (the worker builds it from the weights seed)."""
    return ExplorerJob(
        label=str(spec),
        in_dim=spec.in_dim,
        out_dim=spec.out_dim,
        spec_text=spec.to_json(),
        **_shared_fields(settings, inputs),
    )


def _shared_fields(settings: ExplorerSettings, inputs: InputSettings) -> dict[str, Any]:
    """The job's fields that do not depend on which network is explored."""
    return dict(
        inputs=inputs,
        net_seed=settings.net_seed.value(),
        dtype=settings.dtype_box.currentText(),
        loss=settings.loss(),
        target_path=settings.target_field.path(),
        bins=settings.bins_box.value(),
    )
