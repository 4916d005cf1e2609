"""Open-QA evaluation and its metrics: exact match (text, regex), Recall@k, Retrieval Utility, the `evaluate` module.

One module a responsibility:

- `answer_match`: whether one answer is right ([`exact_match`]) or found in a block or corpus ([`has_answer`],
  [`CorpusAnswerFinder`]); the answer normalization itself is `realm_hf.data.answers` (the QA readers use it too);
- `metrics`: scores over a set of questions ([`evaluate_predictions`], [`recall_at_k`], [`bootstrap_interval`],
  [`retrieval_utility`]) and [`EVALUATE_MODULE_PATH`], the folder of the `evaluate` module `realm_open_qa/`;
- `retrieval`: the top-k blocks of each question and the batch collated from them ([`retrieve_and_collate`]);
- `open_qa`: [`evaluate_open_qa`] (exact match, Recall@k, predictions with provenance) and its metrics file;
- `loading`: a saved `RealmForOpenQA` with its tokenizer and index ([`load_open_qa`]).

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "answer_match": ["CorpusAnswerFinder", "exact_match", "has_answer", "simple_tokenize"],
        "loading": ["load_open_qa", "resolve_index_directory"],
        "metrics": [
            "EVALUATE_MODULE_PATH", "bootstrap_interval", "evaluate_predictions", "recall_at_k", "retrieval_utility",
        ],
        "open_qa": ["evaluate_open_qa", "parse_recall_at", "write_metrics_file"],
        "retrieval": [
            "RETRIEVALS", "block_embeddings", "make_collator", "retrieval_hits", "retrieve_and_collate", "retrieve_blocks",
        ],
    },
)
