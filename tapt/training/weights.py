"""Weighted averages of models' state dicts: the arithmetic of ``training.average_last``
(:mod:`tapt.training.average`) and of ``tapt merge`` / ``tapt soup``
(:mod:`tapt.selection.merge`, :mod:`tapt.selection.soup`), kept in the training layer so that
a training run does not import the model-selection package above it.

Every floating-point tensor is the weighted sum of the sources' tensors, accumulated in
float64 in the order given and stored in the first source's dtype; integer and boolean
tensors are copied and must be equal in every source.
"""

from __future__ import annotations

from collections.abc import Sequence


class MergeError(ValueError):
    """Models that cannot be merged, or weights that cannot merge them."""


def weighted_sum(tensors: Sequence, weights: Sequence[float]):
    """``sum_i weights[i] * tensors[i]``, accumulated in float64 in order, returned in
    ``tensors[0]``'s dtype (the module docstring's formula)."""
    import torch

    total = weights[0] * tensors[0].to(torch.float64)
    for weight, tensor in zip(weights[1:], tensors[1:]):
        total = total + weight * tensor.to(torch.float64)
    return total.to(tensors[0].dtype)


def merge_state_dicts(states: Sequence[dict], weights: Sequence[float],
                      names: Sequence[str], *, finite: bool = True) -> dict:
    """The merged state dict: floating tensors by :func:`weighted_sum`, integer and boolean
    tensors copied (refused unless equal in all sources); ``finite``: a non-finite merged
    tensor is refused naming its key (False: the caller checks the merged model). ``states``
    share keys, shapes and dtypes (:func:`check_same_architecture`)."""
    import torch

    merged = {}
    for key, tensor in states[0].items():
        tensors = [state[key] for state in states]
        if not tensor.is_floating_point():
            for other, name in zip(tensors[1:], names[1:]):
                if not torch.equal(other, tensor):
                    raise MergeError(f"key '{key}' ({tensor.dtype}) differs between "
                                     f"{names[0]} and {name}: integer and boolean tensors "
                                     "are copied, not averaged, so they must be equal")
            merged[key] = tensor.clone()
            continue
        value = weighted_sum(tensors, weights)
        if finite and not bool(torch.isfinite(value).all()):
            broken = [name for name, t in zip(names, tensors) if not bool(torch.isfinite(t).all())]
            raise MergeError(f"key '{key}': the merged tensor is not finite (NaN/inf in "
                             f"{', '.join(broken) or 'the weighted sum'})")
        merged[key] = value
    return merged


def merge_into(target, states: Sequence[dict], weights: Sequence[float],
               names: Sequence[str], *, finite: bool = True) -> None:
    """Load the merge of ``states`` into ``target`` (a model of their architecture);
    ``finite`` as for :func:`merge_state_dicts`."""
    target.load_state_dict(merge_state_dicts(states, weights, names, finite=finite),
                           strict=True)
