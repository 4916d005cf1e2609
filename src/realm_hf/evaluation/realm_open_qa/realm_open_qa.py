"""`evaluate` metric for REALM Open-QA: exact match against any reference answer, text or regex (CuratedTrec).

Load it offline from the installed package:

```python
import evaluate
from realm_hf.evaluation import EVALUATE_MODULE_PATH

metric = evaluate.load(EVALUATE_MODULE_PATH)
metric.compute(predictions=["1889"], references=[["1889", "in 1889"]])  # {'exact_match': 100.0}
```

The scoring itself lives in `realm_hf.evaluation.metrics`; this file only adapts it to the `evaluate` interface.
"""

from collections.abc import Sequence

import datasets
import evaluate

from realm_hf.evaluation.metrics import evaluate_predictions


_CITATION = """\
@inproceedings{guu2020realm,
  title={Retrieval Augmented Language Model Pre-Training},
  author={Guu, Kelvin and Lee, Kenton and Tung, Zora and Pasupat, Panupong and Chang, Ming-Wei},
  booktitle={Proceedings of the 37th International Conference on Machine Learning},
  year={2020}
}
"""

_DESCRIPTION = """\
Open-domain QA exact match as reported in the REALM paper. A prediction is correct when it matches any of its
reference answers: for text answers after SQuAD v1.1 normalization (lowercase, no punctuation, no articles,
collapsed whitespace); for regex answers (CuratedTrec) when a reference pattern, compiled with IGNORECASE,
UNICODE and MULTILINE, matches the start of the raw prediction with `re.match` (DrQA / ORQA semantics).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[str]`): one predicted answer per question.
    references (`list[list[str]]`): the reference answers of each question (regular expressions for "regex").
    answer_formats (`str` or `list[str]`, *optional*): "text" or "regex", one per question or one for all;
        defaults to "text". With `add_batch`, pass the formats of all accumulated questions to `compute`.
Returns:
    exact_match (`float`): percentage of questions answered correctly, in [0, 100].
Examples:
    >>> metric = evaluate.load(EVALUATE_MODULE_PATH)
    >>> metric.compute(predictions=["130 years ago"], references=[[r"\\d+ years?"]], answer_formats="regex")
    {'exact_match': 100.0}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class RealmOpenQA(evaluate.Metric):
    """Exact match for open-domain QA with text or regex reference answers."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
            reference_urls=["https://arxiv.org/abs/2002.08909"],
        )

    def _compute(
        self,
        predictions: Sequence[str],
        references: Sequence[Sequence[str]],
        answer_formats: str | Sequence[str] | None = None,
    ) -> dict[str, float]:
        result = evaluate_predictions(predictions, references, answer_formats)
        return {"exact_match": result["exact_match"]}
