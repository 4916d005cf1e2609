"""Local `evaluate` metric modules shipped with realm_hf (load them with `evaluate.load(path)`)."""
