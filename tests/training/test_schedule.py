"""The learning-rate schedule of the training loop: transformers' linear warm-up/decay, and groups that start late
(the retriever after the reading warm-up), and groups that rest for a while (the encoder's `encoder_freeze_steps`)."""

import pytest
import torch
from transformers import get_linear_schedule_with_warmup

from realm_hf.training.schedule import group_schedule, linear_schedule


@pytest.mark.parametrize("warmup", [0, 3, 10])
def test_without_a_start_step_it_is_transformers_linear_schedule(warmup):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    reference = get_linear_schedule_with_warmup(optimizer, warmup, 20)
    expected = []
    for _ in range(25):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert [linear_schedule(step, warmup, 20) for step in range(25)] == pytest.approx(expected)


def test_a_late_group_is_zero_until_its_start_then_warms_up_and_decays_to_zero_with_the_others():
    factors = [linear_schedule(step, warmup_steps=4, total_steps=20, start_step=8) for step in range(21)]
    assert factors[:8] == [0.0] * 8
    assert factors[8:13] == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert factors[12:] == sorted(factors[12:], reverse=True) and factors[20] == 0.0


@pytest.mark.parametrize("processes", [1, 2])
def test_a_paused_group_learns_before_its_pause_rests_during_it_then_warms_up_again(processes):
    def factor(step, pause):
        return group_schedule(step * processes, warmup_steps=4 * processes, total_steps=20 * processes,
                               start_step=0, processes=processes, pause_steps=pause)

    # a reading warm-up of 6 steps, then 5 steps of rest
    paused = [factor(step, (6, 11)) for step in range(21)]
    assert paused[:6] == [linear_schedule(step, 4, 20) for step in range(6)]
    assert paused[6:11] == [0.0] * 5
    assert paused[11:16] == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert paused[15:] == sorted(paused[15:], reverse=True) and paused[20] == 0.0
    # a pause from the first step is a late start
    assert [factor(step, (0, 8)) for step in range(21)] == [linear_schedule(s, 4, 20, 8) for s in range(21)]
    # a group that has not started (the retriever before its gate opens) stays at 0 after the pause
    assert group_schedule(15, 4, 20, lambda: None, 1, pause_steps=(6, 11)) == 0.0
