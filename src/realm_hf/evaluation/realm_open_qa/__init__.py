"""The `realm_open_qa` evaluate metric; load it with `evaluate.load(realm_hf.evaluation.EVALUATE_MODULE_PATH)`."""
