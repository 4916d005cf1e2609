"""The `realm-hf demo` application, built on realm_hf's public API: REALM's retriever learning from the masked-LM
signal on a synthetic knowledge task, against a frozen-retriever control ([`run_knowledge_demo`]), and the stages it
shares with `benchmarks/bench_knowledge.py` (`realm_hf.demo.knowledge_runs`); the Wikipedia Open-QA demo
(`--recipe wikipedia-qa`: `realm_hf.demo.wikipedia_qa`, its stages and its data); and the defaults of both
(`realm_hf.demo.defaults`, which the CLI reads without the training stack)."""

from __future__ import annotations

from typing import Any

__all__ = ["KnowledgeDemoSettings", "run_knowledge_demo"]


def __getattr__(name: str) -> Any:
    # lazy: the CLI imports `realm_hf.demo.defaults` without the training stack
    if name in __all__:
        from . import knowledge

        return getattr(knowledge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
