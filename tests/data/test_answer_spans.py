import re

import pytest
import torch

from realm_hf.data.answer_spans import find_answer_spans, pad_answer_spans


BLOCK = (
    "The Eiffel Tower was completed in 1889, about 130 years ago. The sun is 5,778 K hot. "
    "Paris is in the U.S. state of Texas too, and Paris is small. ☃"
)


@pytest.fixture(scope="module")
def block(tokenizer):
    ids = tokenizer(BLOCK, add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    # The positions the tests below rely on: guard them so a tokenizer change fails loudly here.
    assert tokens[1:5] == ["e", "##iff", "##el", "tower"]
    assert tokens[8] == "1889" and tokens[11:13] == ["130", "years"]
    assert tokens[18:23] == ["5", ",", "77", "##8", "k"]
    assert tokens[25] == "paris" and tokens[35] == "texas" and tokens[39] == "paris"
    assert tokens[29:33] == ["u", ".", "s", "."]
    assert tokens[-1] == tokenizer.unk_token
    return ids


def _decode(tokenizer, ids, span):
    return tokenizer.decode(ids[span[0] : span[1] + 1])


# ---------------------------------------------------------------------------------------------------------------------
# text answers


def test_text_multi_wordpiece_answer(tokenizer, block):
    spans = find_answer_spans(block, ["Eiffel Tower"], tokenizer)
    assert spans == [(1, 4)]
    assert _decode(tokenizer, block, spans[0]) == "eiffel tower"


def test_text_all_occurrences_of_all_answers_sorted_and_unique(tokenizer, block):
    spans = find_answer_spans(block, ["PARIS", "1889", "paris"], tokenizer)
    assert spans == [(8, 8), (25, 25), (39, 39)]


def test_text_absent_answer(tokenizer, block):
    assert find_answer_spans(block, ["Berlin", "Eiffel Towers"], tokenizer) == []
    assert find_answer_spans(block, [], tokenizer) == []
    assert find_answer_spans([], ["Paris"], tokenizer) == []


def test_text_answer_is_not_a_prefix_of_a_longer_first_wordpiece(tokenizer, block):
    # "eiffel" tokenizes to "e ##iff ##el"; "e" alone would match token 1, "eiff" must not start at "##iff".
    assert find_answer_spans(block, ["iff"], tokenizer) == []
    assert find_answer_spans(block, ["e"], tokenizer) == [(1, 1)]


def test_width_limit(tokenizer, block):
    assert find_answer_spans(block, ["Eiffel Tower"], tokenizer, max_span_width=4) == [(1, 4)]
    assert find_answer_spans(block, ["Eiffel Tower", "1889"], tokenizer, max_span_width=3) == [(8, 8)]
    with pytest.raises(ValueError, match="max_span_width"):
        find_answer_spans(block, ["Paris"], tokenizer, max_span_width=0)


def test_block_offset_places_spans_in_the_joined_reader_sequence(tokenizer, block):
    question = "When was the Eiffel Tower completed?"
    joined = tokenizer(question, BLOCK)["input_ids"]  # [CLS] x [SEP] z [SEP]
    offset = len(tokenizer(question, add_special_tokens=False)["input_ids"]) + 2
    assert joined[offset : offset + len(block)] == block
    spans = find_answer_spans(block, ["Eiffel Tower", "1889"], tokenizer, block_offset=offset)
    assert spans == [(1 + offset, 4 + offset), (8 + offset, 8 + offset)]
    assert [_decode(tokenizer, joined, span) for span in spans] == ["eiffel tower", "1889"]
    with pytest.raises(ValueError, match="block_offset"):
        find_answer_spans(block, ["Paris"], tokenizer, block_offset=-1)


def test_token_strings_and_tensors_give_the_same_spans(tokenizer, block):
    tokens = tokenizer.convert_ids_to_tokens(block)
    expected = find_answer_spans(block, ["Eiffel Tower", "paris"], tokenizer)
    assert find_answer_spans(tokens, ["Eiffel Tower", "paris"], tokenizer) == expected
    assert find_answer_spans(torch.tensor(block), ["Eiffel Tower", "paris"], tokenizer) == expected
    # A bare string is one answer.
    assert find_answer_spans(block, "Eiffel Tower", tokenizer) == [(1, 4)]


def test_unknown_token_answers_do_not_match_unknown_tokens(tokenizer, block):
    assert tokenizer("☃", add_special_tokens=False)["input_ids"] == [tokenizer.unk_token_id]
    assert block[-1] == tokenizer.unk_token_id
    assert find_answer_spans(block, ["☃"], tokenizer) == []


# ---------------------------------------------------------------------------------------------------------------------
# regex answers


def test_regex_answer_maps_to_wordpieces(tokenizer, block):
    spans = find_answer_spans(block, [r"\d+ years?"], tokenizer, answer_format="regex")
    assert spans == [(11, 12)]
    spans = find_answer_spans(block, ["EIFFEL"], tokenizer, answer_format="regex", block_offset=3)
    assert spans == [(4, 6)]  # IGNORECASE; "e ##iff ##el" shifted by 3


def test_regex_all_matches_and_alternation(tokenizer, block):
    spans = find_answer_spans(block, ["Paris|Texas"], tokenizer, answer_format="regex")
    assert spans == [(25, 25), (35, 35), (39, 39)]


def test_regex_matches_must_fall_on_wordpiece_boundaries(tokenizer, block):
    # "e ##iff ##el": "eiff" and "iffel" begin and end on wordpiece edges; "eif" ends and "ffel" starts inside
    # "##iff".
    assert find_answer_spans(block, ["eiff"], tokenizer, answer_format="regex") == [(1, 2)]
    assert find_answer_spans(block, ["iffel"], tokenizer, answer_format="regex") == [(2, 3)]
    assert find_answer_spans(block, ["eif"], tokenizer, answer_format="regex") == []
    assert find_answer_spans(block, ["ffel"], tokenizer, answer_format="regex") == []


def test_regex_punctuation_spacing_either_way(tokenizer, block):
    # decode() reads "5,778" back as "5, 778"; both spellings of a pattern find it.
    assert find_answer_spans(block, [r"5,?778\s*K"], tokenizer, answer_format="regex") == [(18, 22)]
    assert find_answer_spans(block, [r"5, 778"], tokenizer, answer_format="regex") == [(18, 21)]
    assert find_answer_spans(block, [r"U\.S\."], tokenizer, answer_format="regex") == [(29, 32)]


def test_regex_edge_whitespace_is_trimmed(tokenizer, block):
    assert find_answer_spans(block, [r"\s1889\s?"], tokenizer, answer_format="regex") == [(8, 8)]


def test_regex_width_limit(tokenizer, block):
    pattern = [r"\d+ years?"]
    assert find_answer_spans(block, pattern, tokenizer, answer_format="regex", max_span_width=2) == [(11, 12)]
    assert find_answer_spans(block, pattern, tokenizer, answer_format="regex", max_span_width=1) == []


def test_regex_absent_and_invalid(tokenizer, block):
    assert find_answer_spans(block, [r"\d+ miles"], tokenizer, answer_format="regex") == []
    with pytest.raises(ValueError, match=re.escape("'(unclosed'")):
        find_answer_spans(block, ["(unclosed"], tokenizer, answer_format="regex")
    with pytest.raises(ValueError, match="'regexp'"):
        find_answer_spans(block, ["x"], tokenizer, answer_format="regexp")


def test_regex_without_offset_mapping_falls_back_to_incremental_decoding(tokenizer, block):
    class SlowTokenizer:
        """The fast tokenizer with its offset mapping hidden, like a slow (Python) tokenizer."""

        is_fast = False

        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, *args, **kwargs):
            if kwargs.get("return_offsets_mapping"):
                raise AssertionError("a slow tokenizer has no offset mapping")
            return tokenizer(*args, **kwargs)

    slow = SlowTokenizer()
    for pattern in [r"\d+ years?", "eiff", "Paris|Texas"]:
        expected = find_answer_spans(block, [pattern], tokenizer, answer_format="regex")
        assert expected
        assert find_answer_spans(block, [pattern], slow, answer_format="regex") == expected


# ---------------------------------------------------------------------------------------------------------------------
# pad_answer_spans


def test_pad_answer_spans_two_dims():
    starts, ends = pad_answer_spans([[(1, 2), (5, 7)], [], [(3, 3)]])
    assert starts.dtype == torch.long and ends.dtype == torch.long
    assert starts.tolist() == [[1, 5], [-1, -1], [3, -1]]
    assert ends.tolist() == [[2, 7], [-1, -1], [3, -1]]


def test_pad_answer_spans_max_answers_pads_and_truncates():
    starts, ends = pad_answer_spans([[(1, 2), (5, 7)], [(3, 3)]], max_answers=3)
    assert starts.tolist() == [[1, 5, -1], [3, -1, -1]]
    starts, ends = pad_answer_spans([[(1, 2), (5, 7)], [(3, 3)]], max_answers=1)
    assert starts.tolist() == [[1], [3]] and ends.tolist() == [[2], [3]]
    with pytest.raises(ValueError, match="max_answers"):
        pad_answer_spans([[(1, 2)]], max_answers=0)


def test_pad_answer_spans_batch_of_candidates_and_empties():
    starts, ends = pad_answer_spans([[[(1, 2)], []], [[], [(5, 6), (7, 8)]]])
    assert starts.shape == (2, 2, 2)
    assert starts.tolist() == [[[1, -1], [-1, -1]], [[-1, -1], [5, 7]]]
    assert ends.tolist() == [[[2, -1], [-1, -1]], [[-1, -1], [6, 8]]]
    # No block has an answer: still one (padding) column.
    starts, _ = pad_answer_spans([[], []])
    assert starts.tolist() == [[-1], [-1]]
    starts, _ = pad_answer_spans([], max_answers=4)
    assert starts.shape == (0, 4)


def test_pad_answer_spans_bad_nesting():
    with pytest.raises(ValueError, match="ragged"):
        pad_answer_spans([[[(1, 2)], []], [[]]])
    with pytest.raises(ValueError, match="wrap a single block"):
        pad_answer_spans([(1, 2), (3, 4)])
