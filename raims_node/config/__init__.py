"""Configuration: the config tree (YAML/JSON directory, file or stdin), parameters with
units, and `ms_gen_key` (keys, signatures and exported per-node configurations)."""
