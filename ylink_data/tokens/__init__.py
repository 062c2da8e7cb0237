"""Training formats built from finished runs: token-weighted mixtures (`mix`, `mix_config`: `ylink mix`)
and Megatron files for an existing run (`export`: `ylink export megatron`)."""
