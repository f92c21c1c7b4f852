"""The stages of a rollout (issue "The main job"; DESIGN.md "Daemons on executors").

Driver side: `topology` (which node runs where, in which start wave), `keys` (the
service's master keys and one export per node). Per-host barrier stages, one task per
executor host (`hosts`): `deploy` (daemons started detached, `daemons`), `converge`,
`traffic`, `collect` (admin JSON, read with `admin`, into lake rows) and `teardown`.
Errors are `errors.RolloutError`s naming the host, node and file to look at.
"""
