"""Model soups: the uniform weight average of fine-tuned `RealmForOpenQA` models that share their index."""

from __future__ import annotations

import json
import os

import pytest
import torch
from openqa_helpers import load_tokenizer, tiny_index, tiny_model
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf import RealmForOpenQA
from realm_hf.training.soup import average_open_qa_models, average_state_dicts


def save_fine_tuned(directory, model, tokenizer, index) -> str:
    """What `OpenQaTrainer.save_model` writes: the model paired with its index in `<directory>/index`."""
    model.config.index_repo_id = "index"
    model.config.index_fingerprint = index.fingerprint
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    index.save_pretrained(os.path.join(directory, "index"))
    return str(directory)


@pytest.fixture(scope="module")
def two_fine_tunings(tmp_path_factory):
    """Two tiny models with one index (built by the first's document tower) but other weights elsewhere."""
    tokenizer = load_tokenizer()
    torch.manual_seed(0)
    first = tiny_model(tokenizer)
    index = tiny_index(first, tokenizer)
    torch.manual_seed(1)
    second = tiny_model(tokenizer)
    root = tmp_path_factory.mktemp("soup")
    return [save_fine_tuned(root / name, model, tokenizer, index) for name, model in (("a", first), ("b", second))]


def test_the_soup_holds_the_mean_of_the_weights_and_answers_from_their_index(two_fine_tunings, tmp_path):
    from transformers import pipeline

    import realm_hf

    realm_hf.register_auto_classes()  # realm_hf was imported before transformers' pipelines

    from realm_hf.pipelines import OPEN_QA_TASK

    soup_dir = average_open_qa_models(two_fine_tunings, tmp_path / "soup")
    soup = RealmForOpenQA.from_pretrained(soup_dir).state_dict()
    first, second = (RealmForOpenQA.from_pretrained(directory).state_dict() for directory in two_fine_tunings)
    differing = [name for name in first if first[name].is_floating_point() and not torch.equal(first[name], second[name])]
    assert differing  # the test means something: the two models differ
    for name in first:
        expected = (first[name] + second[name]) / 2 if first[name].is_floating_point() else first[name]
        torch.testing.assert_close(soup[name], expected, msg=name)
    manifest = json.loads((tmp_path / "soup" / "index" / "manifest.json").read_text())
    assert manifest == json.loads(open(os.path.join(two_fine_tunings[0], "index", "manifest.json")).read())
    answer = pipeline(OPEN_QA_TASK, model=soup_dir)("who wrote moby-dick")
    assert answer["title"] in {"Eiffel Tower", "Mount Everest", "Amazon River", "Marie Curie", "Sahara", "Moby-Dick"}
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporary left behind


def test_the_soup_of_one_model_twice_is_that_model(two_fine_tunings, tmp_path):
    model = two_fine_tunings[0]
    soup = RealmForOpenQA.from_pretrained(average_open_qa_models([model, model], tmp_path / "soup")).state_dict()
    for name, tensor in RealmForOpenQA.from_pretrained(model).state_dict().items():
        assert torch.equal(soup[name], tensor), name


def test_models_of_other_indexes_are_refused_before_anything_is_written(two_fine_tunings, tmp_path):
    other = tmp_path / "other"
    model = RealmForOpenQA.from_pretrained(two_fine_tunings[1])
    model.config.index_fingerprint = "another-index"
    model.save_pretrained(other)
    os.symlink(os.path.join(two_fine_tunings[1], "index"), other / "index")
    with pytest.raises(ValueError, match="different indexes"):
        average_open_qa_models([two_fine_tunings[0], other], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()


def test_a_directory_without_its_index_is_named(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path / 'missing'} is not a fine-tuned RealmForOpenQA"):
        average_open_qa_models([tmp_path / "missing"], tmp_path / "soup")
    with pytest.raises(ValueError, match="at least one"):
        average_open_qa_models([], tmp_path / "soup")


def test_average_state_dicts_refuses_what_cannot_be_averaged():
    ids = torch.arange(4)
    assert torch.equal(average_state_dicts([{"ids": ids}, {"ids": ids.clone()}])["ids"], ids)
    half = average_state_dicts([{"w": torch.zeros(2, dtype=torch.bfloat16)}, {"w": torch.ones(2, dtype=torch.bfloat16)}])
    assert half["w"].dtype == torch.bfloat16 and half["w"].tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="ids .* differs between the models"):
        average_state_dicts([{"ids": ids}, {"ids": ids + 1}])
    with pytest.raises(ValueError, match="other tensors"):
        average_state_dicts([{"w": torch.zeros(2)}, {"v": torch.zeros(2)}])
    with pytest.raises(ValueError, match="shapes"):
        average_state_dicts([{"w": torch.zeros(2)}, {"w": torch.zeros(3)}])


def test_realm_hf_average_writes_the_soup_and_refuses_bad_directories(two_fine_tunings, tmp_path, capsys):
    """`realm-hf average` is `average_open_qa_models` on the command line: it prints where the soup went; a bad
    directory, or an --output that is not empty, ends in one line naming it, exit status 2, nothing written."""
    from realm_hf.cli import main

    assert main(["average", *two_fine_tunings, "--output", str(tmp_path / "soup")]) == 0
    assert capsys.readouterr().out.strip().endswith("soup")
    soup = RealmForOpenQA.from_pretrained(tmp_path / "soup").state_dict()
    first, second = (RealmForOpenQA.from_pretrained(directory).state_dict() for directory in two_fine_tunings)
    name = next(name for name in first if first[name].is_floating_point() and not torch.equal(first[name], second[name]))
    torch.testing.assert_close(soup[name], (first[name] + second[name]) / 2)

    missing = tmp_path / "no-such-run"
    assert main(["average", two_fine_tunings[0], str(missing), "--output", str(tmp_path / "other")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(missing) in error and "realm-hf finetune" in error
    assert not (tmp_path / "other").exists()

    before = os.listdir(two_fine_tunings[0])  # an --output that holds something (here: one of the runs) is kept
    assert main(["average", *two_fine_tunings, "--output", two_fine_tunings[0]]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert os.listdir(two_fine_tunings[0]) == before


def test_a_weighted_average_interpolates_and_bad_weights_are_refused_before_anything_is_written(two_fine_tunings, tmp_path):
    """`weights` make WiSE-FT's interpolation between a start and its fine-tuning: 0.25 x first + 0.75 x second."""
    average = RealmForOpenQA.from_pretrained(
        average_open_qa_models(two_fine_tunings, tmp_path / "wise", weights=[0.25, 0.75])
    ).state_dict()
    first, second = (RealmForOpenQA.from_pretrained(directory).state_dict() for directory in two_fine_tunings)
    for name in first:
        expected = 0.25 * first[name] + 0.75 * second[name] if first[name].is_floating_point() else first[name]
        torch.testing.assert_close(average[name], expected, msg=name)
    only_second = average_state_dicts([first, second], [0.0, 1.0])
    assert all(torch.equal(only_second[name], second[name]) for name in second)
    for weights, problem in (([0.5], "one weight per model"), ([0.7, 0.7], "sum to 1"), ([1.5, -0.5], "0 or more")):
        with pytest.raises(ValueError, match=problem):
            average_open_qa_models(two_fine_tunings, tmp_path / "bad", weights=weights)
    assert not (tmp_path / "bad").exists()


def test_realm_hf_average_weights(two_fine_tunings, tmp_path, capsys):
    from realm_hf.cli import main

    assert main(["average", *two_fine_tunings, "--weights", "0.25", "0.75", "--output", str(tmp_path / "wise")]) == 0
    average = RealmForOpenQA.from_pretrained(tmp_path / "wise").state_dict()
    first, second = (RealmForOpenQA.from_pretrained(directory).state_dict() for directory in two_fine_tunings)
    name = next(name for name in first if first[name].is_floating_point() and not torch.equal(first[name], second[name]))
    torch.testing.assert_close(average[name], 0.25 * first[name] + 0.75 * second[name])
    capsys.readouterr()
    assert main(["average", *two_fine_tunings, "--weights", "0.5", "--output", str(tmp_path / "bad")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--weights" in error and "one weight per model" in error
    assert not (tmp_path / "bad").exists()
