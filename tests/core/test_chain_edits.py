"""Editing a network by hand (the editors' + / - buttons and activation combos) as Chains."""

from __future__ import annotations

import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.nets.chain_edits import DEFAULT_WIDTH, Chain, spec_text
from gradviz.core.nets.networks import NetworkSpec


def chain(text: str) -> Chain:
    found = Chain.of(NetworkSpec.parse(text))
    assert found is not None
    return found


def test_net_x_is_built_from_two_widths_by_clicks():
    edited = chain("2-4").with_hidden_added().with_hidden_added()
    assert edited.widths == (2, DEFAULT_WIDTH, DEFAULT_WIDTH, 4)
    edited = edited.with_width(1, 20).with_width(2, 20)
    edited = edited.with_activation(0, "identity").with_activation(1, "identity")
    assert spec_text(edited.spec()) == "2-20-20-4"
    tanh = spec_text(edited.with_activation(1, "tanh").spec())
    assert tanh == "2-20-20:tanh-4"
    assert NetworkSpec.parse(tanh).chain_activations() == ["identity", "tanh"]


def test_a_new_hidden_layer_copies_its_neighbour_and_removal_joins_the_two_linears():
    edited = chain("8-32:relu-3").with_hidden_added()
    assert spec_text(edited.spec()) == "8-32-32-3:relu"
    first = chain("8-32:relu-3").with_hidden_added(1)  # before the first hidden layer
    assert first.widths == (8, 32, 32, 3) and first.activations == ("relu", "relu")
    removed = chain("2-20:tanh-30:relu-4").with_hidden_removed(1)
    assert spec_text(removed.spec()) == "2-30-4:relu"
    assert removed.spec().linears[0].in_features == 2


def test_bias_flags_stay_with_their_layers():
    spec = NetworkSpec.parse(
        '{"version": 1, "layers": [{"type": "linear", "in": 2, "out": 3, "bias": false},'
        ' {"type": "tanh"}, {"type": "linear", "in": 3, "out": 1}]}'
    )
    edited = Chain.of(spec).with_width(1, 5)
    assert [lin.bias for lin in edited.spec().linears] == [False, True]
    assert spec_text(edited.spec()).startswith("{")  # no text form without a bias


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda c: c.with_width(1, 0), "from 1"),
        (lambda c: c.with_hidden_removed(0), "not a hidden layer"),
        (lambda c: c.with_hidden_removed(2), "not a hidden layer"),
        (lambda c: c.with_activation(0, "swish"), "'swish'"),
        (lambda c: c.with_hidden_added(0), "between the input and the output"),
    ],
)
def test_edits_that_would_not_be_a_network_are_refused_in_words(edit, words):
    with pytest.raises(GradvizError, match=words):
        edit(chain("2-20:tanh-4"))


def test_the_output_width_follows_d_for_text_and_json_specs():
    from gradviz.core.nets.chain_edits import with_output_width

    assert spec_text(with_output_width(NetworkSpec.parse("8-16:relu-3"), 2)) == "8-16-2:relu"
    stacked = NetworkSpec.parse(
        '{"version": 1, "layers": [{"type": "linear", "in": 2, "out": 3}, {"type": "relu"},'
        ' {"type": "tanh"}, {"type": "linear", "in": 3, "out": 4, "bias": false}]}'
    )
    followed = with_output_width(stacked, 7)
    assert followed.out_dim == 7 and followed.linears[-1].bias is False
    assert followed.layers[:3] == stacked.layers[:3]
