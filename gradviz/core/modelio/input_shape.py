"""Give a loaded model whose file does not declare its input the shape of one sample.

A state_dict run in the user's own class (``model_class``) says nothing about its input: the
app asks for the sample shape (or takes the input width of the first 2-D weight, right for
an MLP) and learns the output size by running the model once on zeros.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.info import LoadedModel, ModelInfo


def first_input_width(info: ModelInfo) -> int | None:
    """The input width of the first 2-D weight (a good guess for an MLP), else None."""
    for layer in info.layers:
        shape = layer.shapes.get("weight")
        if shape is not None and len(shape) == 2:
            return int(shape[1])
    return None


def with_input_shape(
    loaded: LoadedModel, in_shape: tuple[int, ...] | None, source: str = "given by you"
) -> LoadedModel:
    """``loaded`` with ``info.in_shape``, ``in_dim`` (its size) and ``out_dim`` (numbers per
    sample, from one run on a (2, *in_shape) batch of zeros). ``in_shape`` None: the input
    width of the first 2-D weight, stated as an assumption; ``source`` says where a given
    shape came from. GradvizError when there is no
    shape to take or the model does not run on it."""
    from gradviz.core.modelio.guard import probe_output_size
    from gradviz.core.modelio.loading import _float_dtype

    info = loaded.info
    notes = info.assumptions
    if in_shape is None:
        width = first_input_width(info)
        if width is None:
            raise GradvizError(
                f"{info.path} has no 2-D weight to take the input width from; give the "
                "shape of one input sample (e.g. 3,32,32)."
            )
        in_shape = (width,)
        notes += (f"The input width {width} was taken from the first 2-D weight.",)
    else:
        notes += (f"The input shape {in_shape} was {source}.",)
    out = probe_output_size(loaded.module, in_shape, _float_dtype(loaded.module))
    info = replace(
        info, in_shape=in_shape, in_dim=math.prod(in_shape), out_dim=out, assumptions=notes
    )
    return replace(loaded, info=info)
