import math
import os
import re
import string
import unicodedata

import pytest
import torch

from realm_hf.data.answers import compile_answer_pattern, normalize_answer
from realm_hf.evaluation import (
    EVALUATE_MODULE_PATH,
    bootstrap_interval,
    evaluate_predictions,
    exact_match,
    has_answer,
    recall_at_k,
    retrieval_utility,
    simple_tokenize,
)


def _squad_v11_normalize_answer(s):
    """Verbatim logic of the official SQuAD v1.1 evaluation script, as the oracle."""

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


# ---------------------------------------------------------------------------------------------------------------------
# normalize_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("An apple, a pear and the pie.", "apple pear and pie"),
        ("theater", "theater"),  # "the" inside a word is kept
        ("Another atheist Anthem", "another atheist anthem"),
        ("the-theater", "thetheater"),  # punctuation goes first, so no article is left to remove
        ("a.b", "ab"),
        ("U.S.A.", "usa"),
        ("rock'n'roll", "rocknroll"),
        ("  multiple \t spaces\nand\r\nlines  ", "multiple spaces and lines"),
        ("New\u00a0York", "new york"),  # non-breaking space is whitespace for str.split
        ("Café ÉCOLE", "café école"),  # accents kept, unicode lowercased
        ("Hello—World’s", "hello—world’s"),  # non-ASCII punctuation is not in string.punctuation
        ("The", ""),
        ("", ""),
    ],
)
def test_normalize_answer_edge_cases(text, expected):
    assert normalize_answer(text) == expected


def test_normalize_answer_matches_official_squad_script():
    samples = [
        "The Beatles!",
        "  A   tale of two cities ",
        "Dr. Strangelove (1964)",
        "theatre and the theater",
        "an\tAN\nAn",
        "Ünïcödé — text; with: [brackets]",
        "the_underscore_the",
        "1,000,000 dollars",
    ]
    for sample in samples:
        assert normalize_answer(sample) == _squad_v11_normalize_answer(sample)


# ---------------------------------------------------------------------------------------------------------------------
# exact_match


def test_exact_match_text_any_reference():
    assert exact_match("the Beatles", ["Rolling Stones", "Beatles"])
    assert exact_match("Eiffel  Tower!", ["eiffel tower"])
    assert not exact_match("Beatles band", ["Beatles"])
    assert not exact_match("Beatles", [])
    # A bare string is one reference, not a list of characters.
    assert exact_match("Paris", "paris")
    assert not exact_match("p", "paris")


@pytest.mark.parametrize(
    "prediction, expected",
    [
        ("130 years", True),
        ("1 year", True),
        ("130 YEARS", True),  # IGNORECASE
        ("130 years ago", True),  # re.match anchors at the start only
        ("about 130 years", False),  # ... but it is anchored there
        ("years", False),
    ],
)
def test_exact_match_regex_curatedtrec_semantics(prediction, expected):
    assert exact_match(prediction, [r"\d+ years?"], answer_format="regex") is expected


def test_exact_match_regex_alternation_and_raw_prediction():
    pattern = "Sept?(ember)?|Feb(ruary)?"
    assert exact_match("February", [pattern], answer_format="regex")
    assert exact_match("sept", [pattern], answer_format="regex")
    assert not exact_match("in February", [pattern], answer_format="regex")
    # The prediction is not normalized: articles and case of the raw string matter to the pattern.
    assert exact_match("The Beatles", ["the beatles"], answer_format="regex")
    assert not exact_match("The Beatles", ["beatles"], answer_format="regex")
    # The same pair under text EM is a match, so the two formats really differ.
    assert exact_match("The Beatles", ["beatles"], answer_format="text")
    # Any reference pattern is enough.
    assert exact_match("Long Island", ["New\\s?York", "Long Island|Roosevelt Field"], answer_format="regex")


def test_exact_match_invalid_regex_names_pattern():
    with pytest.raises(ValueError, match=re.escape("'(unclosed'")):
        exact_match("anything", ["(unclosed"], answer_format="regex")
    # Raised even when an earlier pattern already matched.
    with pytest.raises(ValueError, match=re.escape("'[bad'")):
        exact_match("a", ["a", "[bad"], answer_format="regex")


def test_unknown_answer_format_raises():
    with pytest.raises(ValueError, match="'regexp'"):
        exact_match("a", ["a"], answer_format="regexp")
    with pytest.raises(ValueError, match="'fuzzy'"):
        has_answer("a", ["a"], answer_format="fuzzy")


# ---------------------------------------------------------------------------------------------------------------------
# has_answer


def test_simple_tokenize_splits_punctuation_and_lowercases():
    assert simple_tokenize("U.S. Route 66, (1926)") == ["u", ".", "s", ".", "route", "66", ",", "(", "1926", ")"]
    assert simple_tokenize("naïve Café") == ["naïve", "café"]


def test_has_answer_text_token_sequence_match():
    text = "The Eiffel Tower was completed in 1889, on the Champ de Mars."
    assert has_answer(text, ["1889"])
    assert has_answer(text, ["eiffel TOWER"])
    assert has_answer(text, ["Champ-de-Mars", "Berlin"]) is False  # "-" is a token of its own
    assert has_answer(text, ["Berlin", "champ de mars"])
    assert not has_answer(text, ["Tower Eiffel"])  # order matters
    assert not has_answer("It was built in 18890.", ["1889"])  # no partial-token match
    assert not has_answer("The towers fell.", ["tower"])
    assert has_answer("the U.S. army", ["U.S."])


def test_has_answer_unicode_nfd_and_empty_answer():
    precomposed = "un caf\u00e9 au lait"
    decomposed_answer = "cafe\u0301"
    assert has_answer(precomposed, [decomposed_answer])
    # DPR counts an empty answer as found everywhere; here it is skipped.
    assert not has_answer("some text", [""])
    assert not has_answer("some text", ["   "])


def test_has_answer_custom_tokenizer_is_used():
    text = "completed in 1889, on time"
    assert has_answer(text, ["1889"])
    # Whitespace tokenization keeps "1889," as one token, so the answer is not found.
    assert not has_answer(text, ["1889"], tokenizer=str.split)


def test_has_answer_regex_searches_anywhere():
    assert has_answer("It is about 130 years old.", [r"\d+ years?"], answer_format="regex")
    assert has_answer("IN FEBRUARY", ["Feb(ruary)?"], answer_format="regex")
    assert not has_answer("It is old.", [r"\d+ years?"], answer_format="regex")
    with pytest.raises(ValueError, match=re.escape("'(x'")):
        has_answer("text", ["(x"], answer_format="regex")


# ---------------------------------------------------------------------------------------------------------------------
# recall_at_k


def test_recall_at_k():
    retrieved = [
        ["Paris is the capital of France.", "Lyon", "Nice"],  # hit at rank 1
        ["Nothing", "Still nothing", "It was built in 1889."],  # hit at rank 3
        ["No", "answer", "here"],  # miss
        ["Wrong", "About 130 years ago.", "x"],  # regex hit at rank 2
    ]
    references = [["Paris"], ["1889"], ["Tokyo"], [r"\d+ years?"]]
    formats = ["text", "text", "text", "regex"]
    assert recall_at_k(retrieved, references, k=1, answer_formats=formats) == pytest.approx(25.0)
    assert recall_at_k(retrieved, references, k=2, answer_formats=formats) == pytest.approx(50.0)
    assert recall_at_k(retrieved, references, k=3, answer_formats=formats) == pytest.approx(75.0)
    assert recall_at_k(retrieved, references, k=10, answer_formats=formats) == pytest.approx(75.0)
    # As text, the regex is looked for literally and is not found.
    assert recall_at_k(retrieved, references, k=3) == pytest.approx(50.0)


def test_recall_at_k_bad_input():
    with pytest.raises(ValueError, match="k must be at least 1"):
        recall_at_k([["a"]], [["a"]], k=0)
    with pytest.raises(ValueError, match="2 questions"):
        recall_at_k([["a"], ["b"]], [["a"]], k=1)
    with pytest.raises(ValueError, match="no questions"):
        recall_at_k([], [], k=1)
    with pytest.raises(ValueError, match="3 entries"):
        recall_at_k([["a"], ["b"]], [["a"], ["b"]], k=1, answer_formats=["text"] * 3)


# ---------------------------------------------------------------------------------------------------------------------
# bootstrap_interval


def test_bootstrap_interval_contains_the_mean_and_matches_the_normal_approximation():
    hits = [True] * 30 + [False] * 70
    low, high = bootstrap_interval(hits)
    assert 0.0 <= low < 30.0 < high <= 100.0
    # the percentage's standard error is 100 * sqrt(p (1 - p) / n) = 4.58: 30 -+ 1.96 * 4.58
    half = 1.96 * 100 * math.sqrt(0.3 * 0.7 / 100)
    assert low == pytest.approx(30.0 - half, abs=1.5) and high == pytest.approx(30.0 + half, abs=1.5)
    # booleans, 0/1 and floats are the same values
    assert bootstrap_interval([1] * 30 + [0] * 70) == (low, high)
    assert bootstrap_interval([1.0] * 30 + [0.0] * 70) == (low, high)
    # a lower confidence gives a narrower interval inside it
    low_50, high_50 = bootstrap_interval(hits, confidence=0.5)
    assert low < low_50 < 30.0 < high_50 < high
    # fractional values per question (e.g. F1): the interval of their mean
    scores = [0.25, 0.5, 0.75, 1.0] * 25
    low, high = bootstrap_interval(scores)
    assert low < 62.5 < high


def test_bootstrap_interval_is_reproducible_with_its_seed():
    hits = [True] * 37 + [False] * 64
    assert bootstrap_interval(hits, resamples=500, seed=3) == bootstrap_interval(hits, resamples=500, seed=3)
    assert len({bootstrap_interval(hits, resamples=500, seed=seed) for seed in range(6)}) > 1
    # resamples drawn 1,000 at a time: a count that is not a multiple of 1,000 is fine
    low, high = bootstrap_interval(hits, resamples=2500)
    assert low < 100 * 37 / 101 < high


def test_bootstrap_interval_narrows_with_more_questions():
    widths = []
    for n in (100, 1000):
        low, high = bootstrap_interval([True] * (3 * n // 10) + [False] * (7 * n // 10))
        assert low < 30.0 < high
        widths.append(high - low)
    # the width falls as 1 / sqrt(n): sqrt(10) = 3.2 times narrower
    assert widths[0] / widths[1] == pytest.approx(math.sqrt(10), rel=0.2)


def test_bootstrap_interval_of_constant_hits_is_a_point():
    assert bootstrap_interval([True] * 20) == (100.0, 100.0)
    assert bootstrap_interval([False] * 20) == (0.0, 0.0)
    assert bootstrap_interval([True]) == (100.0, 100.0)


@pytest.mark.parametrize(
    "hits, kwargs, message",
    [
        ([], {}, "one value per question"),
        ([[True, False], [True, True]], {}, "one value per question"),
        ([True, False], {"confidence": 1.5}, "confidence must be in"),
        ([True, False], {"confidence": 1.0}, "confidence must be in"),
        ([True, False], {"confidence": 0.0}, "confidence must be in"),
        ([True, False], {"resamples": 0}, "resamples must be at least 1"),
    ],
)
def test_bootstrap_interval_bad_input(hits, kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(hits, **kwargs)


# ---------------------------------------------------------------------------------------------------------------------
# retrieval_utility


def test_retrieval_utility_matches_definition():
    # p(y|z,x) for 3 candidates of 2 questions, and p(y|∅,x).
    p_candidates = torch.tensor([[0.5, 0.125, 0.25], [0.9, 0.3, 0.6]], dtype=torch.float64)
    p_null = torch.tensor([0.25, 0.3], dtype=torch.float64)
    ru = retrieval_utility(p_candidates.log(), p_null.log())
    expected = torch.tensor(
        [[math.log(2.0), math.log(0.5), 0.0], [math.log(3.0), 0.0, math.log(2.0)]], dtype=torch.float64
    )
    assert ru.shape == (2, 3)
    torch.testing.assert_close(ru, expected)
    # A [B, 1] null likelihood gives the same answer.
    torch.testing.assert_close(retrieval_utility(p_candidates.log(), p_null.log()[:, None]), expected)


def test_retrieval_utility_gradients_and_impossible_answers():
    candidates = torch.tensor([[-1.0, float("-inf")]], requires_grad=True)
    null = torch.tensor([-2.0], requires_grad=True)
    ru = retrieval_utility(candidates, null)
    assert ru[0, 0].item() == pytest.approx(1.0)
    assert ru[0, 1].item() == float("-inf")
    ru[:, :1].sum().backward()
    torch.testing.assert_close(candidates.grad, torch.tensor([[1.0, 0.0]]))
    torch.testing.assert_close(null.grad, torch.tensor([-1.0]))


def test_retrieval_utility_bad_shapes():
    with pytest.raises(ValueError, match=r"\[batch_size, num_candidates\]"):
        retrieval_utility(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match=r"must have shape \[2\]"):
        retrieval_utility(torch.zeros(2, 4), torch.zeros(4))


# ---------------------------------------------------------------------------------------------------------------------
# evaluate_predictions and the evaluate module

PREDICTIONS = ["The Eiffel Tower", "130 years ago", "Berlin", "about 130 years", "1889"]
REFERENCES = [["Eiffel Tower", "la tour Eiffel"], [r"\d+ years?"], ["Paris"], [r"\d+ years?"], ["in 1889", "1889"]]
FORMATS = ["text", "regex", "text", "regex", "text"]


def test_evaluate_predictions():
    result = evaluate_predictions(PREDICTIONS, REFERENCES, FORMATS)
    assert result == {"exact_match": pytest.approx(60.0), "count": 5}
    # All as text: only the first and last are right.
    assert evaluate_predictions(PREDICTIONS, REFERENCES)["exact_match"] == pytest.approx(40.0)
    assert evaluate_predictions(["x"], [["y"]], "text") == {"exact_match": 0.0, "count": 1}


def test_evaluate_predictions_bad_input():
    with pytest.raises(ValueError, match="2 predictions but 1"):
        evaluate_predictions(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="no predictions"):
        evaluate_predictions([], [])
    with pytest.raises(ValueError, match=re.escape("'(oops'")):
        evaluate_predictions(["a"], [["(oops"]], "regex")


def test_evaluate_module_offline_matches_function(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import evaluate

    assert os.path.isfile(os.path.join(EVALUATE_MODULE_PATH, "realm_open_qa.py"))
    expected = evaluate_predictions(PREDICTIONS, REFERENCES, FORMATS)["exact_match"]

    metric = evaluate.load(EVALUATE_MODULE_PATH, cache_dir=str(tmp_path), keep_in_memory=True)
    assert set(metric.features) == {"predictions", "references"}
    result = metric.compute(predictions=PREDICTIONS, references=REFERENCES, answer_formats=FORMATS)
    assert result == {"exact_match": pytest.approx(expected)}
    assert result["exact_match"] == pytest.approx(60.0)
    # Default format is text.
    assert metric.compute(predictions=PREDICTIONS, references=REFERENCES)["exact_match"] == pytest.approx(40.0)

    # Loading the script file itself and accumulating batches gives the same number.
    metric = evaluate.load(
        os.path.join(EVALUATE_MODULE_PATH, "realm_open_qa.py"), cache_dir=str(tmp_path), keep_in_memory=True
    )
    metric.add_batch(predictions=PREDICTIONS[:2], references=REFERENCES[:2])
    metric.add_batch(predictions=PREDICTIONS[2:], references=REFERENCES[2:])
    assert metric.compute(answer_formats=FORMATS) == {"exact_match": pytest.approx(60.0)}


def test_corpus_answer_finder_agrees_with_has_answer_on_every_block():
    from realm_hf.evaluation import CorpusAnswerFinder

    blocks = [
        "Eiffel Tower. Built in 1889, the tower is in Paris.",
        "U.S. Route 66. Established (1926) across eight states.",
        "Crème brûlée. A dessert of custard.",
        "Numbers. 18890 is not a year.",
    ]
    finder = CorpusAnswerFinder(blocks)
    questions = [["1889"], ["paris", "Rome"], ["route 66"], ["creme brulee"], ["crème brûlée"], ["889"],
                 ["tower is in"], ["paris u"], ["states numbers"], ["custard"], [""], ["Rome"]]
    for answers in questions:
        expected = any(has_answer(block, answers) for block in blocks)
        assert finder.has_answer(answers) == expected, answers
    # no match may cross two blocks, and regex answers search each block
    assert not finder.has_answer(["paris u"]) and not finder.has_answer(["custard numbers"])
    assert finder.has_answer([r"18\d\d,"], "regex") and not finder.has_answer([r"^Paris"], "regex")


def test_regex_answers_with_accents_match_in_any_unicode_form():
    # CuratedTrec writes `Jes\ús`: an escaped accented letter. Decomposed (NFD) like the text, the escape fell on the
    # bare letter, `\u` + an accent: an incomplete escape, or a pattern that never matched.
    nfd = unicodedata.normalize("NFD", "Tabaré Vázquez was president")
    for text in ("Tabaré Vázquez was president", nfd):
        assert has_answer(text, [r"V\ázquez"], "regex")
        assert has_answer(text, [r"V[áa]zquez"], "regex")  # a class with an accented letter
        assert has_answer(text, ["Vázquez"], "regex")
        assert exact_match(text.split(" was")[0], [r"Tabar\é V\ázquez"], "regex")
    assert has_answer("Jesús Gil was the mayor of Marbella.", [r"Jesus\s+Gil\s+y\s+Gil|Jes\ús Gil"], "regex")
    assert not has_answer("Jesus Gil was the mayor.", [r"Jes\ús Gil"], "regex")  # the accent still counts
    assert has_answer("a path a\\b", [r"a\\b"], "regex")  # an escaped backslash is left as it is
    assert exact_match("Jos\u00e9 Mart\u00ed", [r"Jos\é Mart\í"], "regex")


CURATEDTREC = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "qa", "curatedtrec-train.jsonl")


@pytest.mark.skipif(not os.path.isfile(CURATEDTREC), reason="needs ../shared/data/qa/curatedtrec-train.jsonl")
def test_every_curatedtrec_pattern_compiles_and_matches_its_own_accented_answers():
    import json

    with open(CURATEDTREC, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    accented = 0
    for row in rows:
        for pattern in row["answers"]:
            compile_answer_pattern(pattern)  # raises on a pattern that does not compile
            literal = re.sub(r"\\(.)", r"\1", pattern)
            if not literal.isascii() and re.fullmatch(r"[\w\s.'-]+", literal):  # a plain accented name
                accented += 1
                assert has_answer(f"... {literal} ...", [pattern], "regex"), pattern
                assert has_answer(unicodedata.normalize("NFD", f"... {literal} ..."), [pattern], "regex"), pattern
    assert accented > 0
