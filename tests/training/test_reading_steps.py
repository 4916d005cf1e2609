"""Which steps of pre-training are reading steps, and what they read when X is another corpus."""

import datasets
import pytest

from realm_hf.training.reading_steps import ReadingSchedule


def _sentences(count: int) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"input_ids": [[i] for i in range(count)], "source_block_id": list(range(count))})


def test_the_warm_up_steps_read():
    schedule = ReadingSchedule(warmup_steps=2)
    assert [schedule.is_reading_step(step) for step in range(5)] == [True, True, False, False, False]
    assert ReadingSchedule(0).any is False and ReadingSchedule(3).any and ReadingSchedule(0, loss_weight=0.5).any


def test_x_is_z_reads_the_steps_own_batch():
    batch = [{"input_ids": [5], "source_block_id": 7}]
    assert ReadingSchedule(1).examples(0, batch) is batch


def test_x_not_z_reads_sentences_of_z_in_a_seeded_order_each_process_its_own_slice():
    sentences = _sentences(10)
    ranks = [ReadingSchedule(2, sentences, seed=3, num_processes=2, process_index=p, loss_weight=1.0) for p in (0, 1)]
    batch = [{}, {}]

    def read(schedule, step):
        return [e["source_block_id"] for e in schedule.examples(step, batch)]

    order = [int(i) for i in ranks[0].order]
    assert sorted(order) == list(range(10)) and order == [int(i) for i in ranks[1].order]  # the same seeded order
    # steps 0, 1 (warm-up), then the reading loss beside each step: step n reads slice 2n + p on rank p
    assert read(ranks[0], 0) == order[0:2] and read(ranks[1], 0) == order[2:4]
    assert read(ranks[0], 1) == order[4:6] and read(ranks[1], 1) == order[6:8]
    assert read(ranks[0], 2) == order[8:10] and read(ranks[1], 2) == order[0:2]  # wraps around Z's sentences
    assert read(ranks[0], 3) == order[2:4]
    assert read(ReadingSchedule(2, sentences, seed=4), 0) != order[0:2]  # another seed, another order


def test_with_a_reading_loss_every_step_after_the_warm_up_reads_beside_realm_and_z_is_read_in_step_order():
    sentences = _sentences(10)
    schedule = ReadingSchedule(2, sentences, seed=3, loss_weight=0.5)
    assert schedule.any and ReadingSchedule(0, loss_weight=0.5).any
    assert [schedule.reads_beside(step) for step in range(4)] == [False, False, True, True]  # not in the warm-up
    assert not ReadingSchedule(2, sentences).reads_beside(3)  # no reading loss
    # every step reads once (a reading step, or the reading loss beside REALM's): step n reads slice n
    order = [int(i) for i in schedule.order]
    assert [e["source_block_id"] for e in schedule.examples(3, [{}, {}])] == order[6:8]


def test_a_reading_loss_batch_size_reads_that_many_sentences_each_step_in_a_seeded_order():
    own = _sentences(10)  # X = Z: the training sentences themselves
    ranks = [ReadingSchedule(1, seed=5, num_processes=2, process_index=p, loss_weight=30.0, loss_batch_size=3,
                             own_sentences=own) for p in (0, 1)]
    batch = [{"input_ids": [9], "source_block_id": 9}]
    assert ranks[0].examples(0, batch) is batch  # the warm-up reads the step's own batch, whatever the size
    order = [int(i) for i in ranks[0].order]
    read = [[e["source_block_id"] for e in rank.examples(2, batch)] for rank in ranks]
    # step 2 reads slice 2 * 2 + p of 3 sentences, wrapping around the 10
    assert read[0] == [order[i % 10] for i in range(12, 15)] and read[1] == [order[i % 10] for i in range(15, 18)]
    x_not_z = ReadingSchedule(0, _sentences(10), seed=5, loss_weight=1.0, loss_batch_size=4)
    assert len(x_not_z.examples(0, batch)) == 4  # Z's sentences, 4 a step instead of REALM's 1
    with pytest.raises(ValueError, match="own_sentences"):
        ReadingSchedule(0, loss_weight=1.0, loss_batch_size=4)


def test_a_reading_loss_batch_size_without_a_reading_loss_is_refused_in_one_line():
    from realm_hf.training.arguments import PretrainingArguments

    with pytest.raises(ValueError, match=r"--reading_loss_batch_size 48 sizes the reading loss, but "
                                         r"--reading_loss_weight is 0: set --reading_loss_weight"):
        PretrainingArguments(reading_loss_batch_size=48)
    with pytest.raises(ValueError, match="reading_loss_batch_size"):
        PretrainingArguments(reading_loss_weight=1.0, reading_loss_batch_size=0)
    assert PretrainingArguments(reading_loss_weight=1.0, reading_loss_batch_size=48).reading_loss_batch_size == 48


def test_a_final_reading_loss_weight_is_reached_linearly_from_the_first_step_after_the_warm_up():
    schedule = ReadingSchedule(2, loss_weight=10.0, loss_weight_final=30.0, max_steps=7)
    # steps 2..6 are REALM's: 10 at the first, 30 at the last, on the line between
    assert [schedule.loss_weight_at(step) for step in range(8)] == [10.0, 10.0, 10.0, 15.0, 20.0, 25.0, 30.0, 30.0]
    assert ReadingSchedule(2, loss_weight=10.0).loss_weight_at(5) == 10.0  # no final weight: constant
    with pytest.raises(ValueError, match="max_steps"):
        ReadingSchedule(2, loss_weight=10.0, loss_weight_final=30.0)
    from realm_hf.training.arguments import PretrainingArguments

    with pytest.raises(ValueError, match=r"--reading_loss_weight_final 30 ramps the reading loss, but "
                                         r"--reading_loss_weight is 0"):
        PretrainingArguments(reading_loss_weight_final=30.0)
    with pytest.raises(ValueError, match="reading_loss_weight_final"):
        PretrainingArguments(reading_loss_weight=1.0, reading_loss_weight_final=-1.0)
