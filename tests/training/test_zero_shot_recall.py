"""Pre-training's zero-shot Recall@k reads QA files as `realm-hf evaluate` does: a file, or a row slice of one
(`nq-dev.jsonl[1000:1500]`). The index holds every block within k, so a question's hit is whether its answer is in the
corpus at all: the recall of a slice is known whatever the (random) retriever ranks."""

from __future__ import annotations

import pytest
import torch
from openqa_helpers import ARTICLES, load_tokenizer, tiny_index, tiny_model, write_jsonl
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.evaluation import CorpusAnswerFinder
from realm_hf.training.pretrain_evaluation import zero_shot_recall

# in the corpus (hit) or not (miss), by row: 0 hit, 1 hit, 2 miss, 3 miss, 4 hit, 5 miss
ROWS = [
    {"question": "when was the eiffel tower completed", "answers": ["1889"]},
    {"question": "where was marie curie born", "answers": ["Warsaw"]},
    {"question": "what is the capital of japan", "answers": ["Tokyo"]},
    {"question": "who painted the mona lisa", "answers": ["Leonardo da Vinci"]},
    {"question": "when was moby-dick published", "answers": ["18[0-9]{2}"], "answer_format": "regex"},
    {"question": "how tall is the burj khalifa", "answers": ["828 metres"]},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tokenizer = load_tokenizer()
    model = tiny_model(tokenizer)
    index = tiny_index(model, tokenizer)
    qa_file = write_jsonl(tmp_path_factory.mktemp("qa") / "qa.jsonl", ROWS)
    return model.retriever, tokenizer, index, qa_file


def recall(setup, path: str, max_questions: int = 100, answer_finder=None) -> float:
    retriever, tokenizer, index, _ = setup
    return zero_shot_recall(
        retriever, tokenizer, index, path, max_questions, max_length=32, device=torch.device("cpu"),
        k=index.num_blocks, batch_size=2, answer_finder=answer_finder,
    )


@pytest.mark.parametrize(
    "rows, expected",
    [("", 50.0), ("[0:2]", 100.0), ("[2:4]", 0.0), ("[1:5]", 50.0), ("[4:]", 50.0), ("[:3]", 100.0 * 2 / 3),
     ("[3:5]", 50.0)],
)
def test_a_sliced_qa_file_gives_the_recall_of_exactly_its_questions(setup, rows, expected):
    assert setup[2].num_blocks == len(ARTICLES)
    assert recall(setup, setup[3] + rows) == pytest.approx(expected)


def test_max_questions_counts_from_the_start_of_the_slice(setup):
    qa_file = setup[3]
    assert recall(setup, f"{qa_file}[2:]", max_questions=2) == 0.0  # rows 2, 3
    assert recall(setup, f"{qa_file}[1:]", max_questions=1) == 100.0  # row 1
    assert recall(setup, f"{qa_file}[3:]", max_questions=2) == 50.0  # rows 3, 4


def test_answerable_questions_of_a_slice(setup):
    finder = CorpusAnswerFinder(f"{article['title']} {article['text']}" for article in ARTICLES)
    qa_file = setup[3]
    assert recall(setup, f"{qa_file}[1:]", answer_finder=finder) == 100.0  # rows 1 and 4 of 1..5
    with pytest.raises(ValueError, match=r"No question of .*qa\.jsonl\[2:4\] has an answer in the knowledge corpus"):
        recall(setup, f"{qa_file}[2:4]", answer_finder=finder)
