"""`lsh_params` computes datasketch's `optimal_param` without scipy: the same (bands, rows) for
every threshold, size and weight a user may give."""
from __future__ import annotations

import pytest
from datasketch.lsh import _optimal_param as datasketch_optimal_param

from ylink_data.text.dedup.minhash import lsh_params


@pytest.mark.parametrize("num_perm", [2, 16, 64, 128, 256])
@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.1, 0.9), (0.9, 0.1)])
def test_same_choice_as_datasketch(num_perm, weights):
    for threshold in [0.05 * k for k in range(1, 20)] + [0.01, 0.72, 0.83, 0.99]:
        ours = lsh_params(threshold, num_perm, *weights)
        assert ours == tuple(datasketch_optimal_param(threshold, num_perm, *weights)), (threshold, num_perm, weights)
