"""Defaults of `realm-hf demo` (the knowledge recipe), importable without the training stack (the CLI reads them)."""

KNOWLEDGE_INITS = ("minilm-cls", "minilm", "tiny")
"""The initializations of the knowledge demo; each has its recipe in `knowledge_runs.KNOWLEDGE_RECIPES`."""
DEMO_INIT = "minilm-cls"
"""all-MiniLM-L6-v2 with REALM's own pooling ([CLS] and a fresh 128-d projection)."""
DEMO_ENTITIES = 100
"""Fictional people, hence documents; two held-out sentences each."""
DEMO_STEPS = 45
"""REALM pre-training steps of each run (the recipe's 60 do not fit five minutes on 2 cores)."""
DEMO_EVAL_EVERY = None
"""Held-out evaluation before the first and after the last REALM step only (each costs about as much as ten steps)."""
DEMO_SHOWN_ANSWERS = 4
"""Held-out sentences answered in full, with the document read and the evidence."""
