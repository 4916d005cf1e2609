"""benchmarks/bench_gpu_step.py on the CPU with tiny random models: it runs, writes its JSON, and the REALM step and
the bare BertModel are measured over the same real tokens, counted as the REALM step really runs them."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import bench_gpu_step  # noqa: E402
import pytest  # noqa: E402

B, K, LQ, LZ = 2, 3, 8, 32
TITLE = 8  # the synthetic blocks' title at Lz = 32: [CLS] 8 title wordpieces [SEP] 20 body wordpieces [SEP]
# training.models.TINY_BERT's transformer layers: 2 x (4*(32*32+32) + 2*(32*64) + 64 + 32 + 4*32)
LAYERS, HIDDEN, NON_EMBEDDING = 2, 32, 17_088


@pytest.mark.usefixtures("restore_logging")
def test_bench_gpu_step_counts_the_same_tokens_for_the_realm_step_and_bare_bert(tmp_path):
    output = tmp_path / "step.json"
    bench_gpu_step.main([
        "--device", "cpu", "--random_init", "--batch_size", str(B), "--num_candidates", str(K),
        "--query_length", str(LQ), "--block_length", str(LZ), "--steps", "2", "--warmup", "1",
        "--index_blocks", "8", "--output", str(output),
    ])
    result = json.loads(output.read_text())
    assert result["errors"] == {}
    realm, bert = result["realm_step"], result["bert_step"]
    assert realm["tokens_per_second"] > 0 and bert["tokens_per_second"] > 0
    assert len(realm["ms_per_step_all"]) == len(bert["ms_per_step_all"]) == 2

    # What one REALM step runs through BERT, with gradient: the B queries; all K candidates of each (the null
    # document [CLS] [SEP] [SEP] included: the retriever re-embeds every candidate); the B*K joined sequences
    # [CLS] x [SEP] body [SEP] (the null document's: the sentence and [SEP]).
    lengths = {
        "queries": [LQ] * B,
        "candidates": ([3] + [LZ] * (K - 1)) * B,
        "joined": ([LQ + 1] + [LQ + LZ - TITLE - 2] * (K - 1)) * B,
    }
    expected_tokens = sum(sum(part) for part in lengths.values())
    assert expected_tokens == 16 + 134 + 138
    assert realm["real_tokens"] == expected_tokens
    assert result["settings"]["tokens_in_batch"] == expected_tokens  # the collated batch's masks say the same
    assert bert["real_tokens"] == realm["real_tokens"]  # the comparison is fair: same tokens...
    assert bert["padded_positions"] == realm["padded_positions"] == B * LQ + B * K * LZ + B * K * (LQ + LZ - TITLE - 2)
    assert [c["shape"] for c in bert["calls"]] == [c["shape"] for c in realm["calls"]]  # ... same sequences
    assert [c["shape"] for c in realm["calls"]] == [[B, LQ], [B * K, LZ], [B * K, LQ + LZ - TITLE - 2]]
    assert all(c["grad"] for c in realm["calls"])
    assert realm["tokens_per_second"] * realm["ms_per_step"] / 1e3 == pytest.approx(realm["real_tokens"])

    # model FLOPs: 6 N T + 12 layers hidden sum(s^2), the same for both
    squares = sum(s * s for part in lengths.values() for s in part)
    expected_flops = 6 * NON_EMBEDDING * expected_tokens + 12 * LAYERS * HIDDEN * squares
    assert result["settings"]["bert"]["non_embedding_parameters"] == NON_EMBEDDING
    assert realm["model_flops"] == bert["model_flops"] == expected_flops
    assert realm["mfu"] == pytest.approx(realm["achieved_tflops"] / 989.0)

    index = result["index"]
    assert index["blocks"] == 8
    assert index["index_build"]["blocks_per_second"] > 0 and index["doc_tower"]["blocks_per_second"] > 0
    assert index["model_flops"] == 8 * (2 * NON_EMBEDDING * LZ + 4 * LAYERS * HIDDEN * LZ * LZ)
