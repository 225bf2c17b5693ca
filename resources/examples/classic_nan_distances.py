"""The classic NaN: fit coordinates to a distance matrix built with sqrt, recorded by gradviz.

    python resources/examples/classic_nan_distances.py RUN [--safe]
    gradviz inspect RUN --json        # first_nonfinite: step 0, tensor "pred_coordinates"

The loop is the one people write; the two gradviz lines are marked. With ``--safe`` the
distances come from ``gradviz.pairwise_distances``, and the same loop trains finite.
"""

from __future__ import annotations

import argparse

import torch

import gradviz


def naive_distances(x: torch.Tensor) -> torch.Tensor:
    """(N, D) -> (N, N): sqrt of the Gram-formula squared distances (NaN gradient at 0)."""
    gram = x @ x.T
    sq = gram.diag()[:, None] + gram.diag()[None, :] - 2 * gram
    return torch.sqrt(sq)


def train(path: str, safe: bool = False, steps: int = 200, n: int = 20) -> list[float]:
    """Fit n random 3-D points to a target's distances; return the loss of every step."""
    torch.manual_seed(0)
    target = gradviz.pairwise_distances(torch.randn(n, 3))
    pred_coordinates = torch.randn(n, 3, requires_grad=True)
    optimizer = torch.optim.Adam([pred_coordinates], lr=1e-2)
    distances = gradviz.pairwise_distances if safe else naive_distances
    losses = []
    with gradviz.watch({"pred_coordinates": pred_coordinates}, path) as rec:  # gradviz
        for _ in range(steps):
            optimizer.zero_grad()
            loss = ((distances(pred_coordinates) - target) ** 2).mean()
            loss.backward()
            rec.log(loss=loss)  # gradviz
            optimizer.step()
            losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the recording to write (a new directory)")
    parser.add_argument("--safe", action="store_true", help="use gradviz.pairwise_distances")
    args = parser.parse_args()
    losses = train(args.path, args.safe)
    print(f"loss: first {losses[0]:.4g}, last {losses[-1]:.4g}")
