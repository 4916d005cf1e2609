"""Only the *choice* of the top k is stale: REALM pre-training scores the retrieved blocks with the CURRENT document
tower, not with the embeddings the (stale) index stored when it was built (the paper, section 3.4: p(z|x) and its
gradient are recomputed with the fresh parameters for the k retrieved documents)."""

import math

import pytest
import torch

pytest.importorskip("spacy")
pytest.importorskip("faiss")

from test_pretrainer import make_trainer


def scores_by_hand(trainer, examples, candidate_block_ids):
    """`f(x, z) = Embed_input(x)ᵀ Embed_doc(z)` `[B, K]` with the trainer's retriever as it is now: each query
    `[CLS] x [SEP]` and each retrieved block `[CLS] title [SEP] body [SEP]` (read from the blocks dataset, not from the
    batch) embedded alone, without padding; ∅ is the empty block `[CLS] [SEP] [SEP]`."""
    retriever = trainer.retriever
    tokenizer = trainer.tokenizer
    rows = {int(block_id): i for i, block_id in enumerate(trainer.blocks["block_id"])}
    null = ([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.sep_token_id], [0, 0, 1])
    scores = torch.zeros(candidate_block_ids.shape, dtype=torch.float64)
    with torch.no_grad():
        for b, example in enumerate(examples):
            query = retriever.embed_queries(torch.tensor([list(example["input_ids"])]))[0].double()  # [D]
            for k, block_id in enumerate(candidate_block_ids[b].tolist()):
                if block_id < 0:
                    ids, types = null
                else:
                    block = trainer.blocks[rows[block_id]]
                    ids, types = block["input_ids"], block["token_type_ids"]
                    assert len(ids) <= retriever.config.block_max_length  # no cut to reproduce
                document = retriever.embed_documents(torch.tensor([ids]), token_type_ids=torch.tensor([types]))[0]
                scores[b, k] = retriever.config.similarity_scale * (query @ document.double())
    return scores


def test_retrieval_probabilities_come_from_the_current_document_tower_not_the_stale_index(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=1, refresh="0", model_kwargs={"share_towers": False})
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    retriever = trainer.retriever
    examples = [trainer.train_examples[i] for i in range(8)]
    with torch.no_grad():
        batch, null_index = trainer.retrieve_and_collate(examples)
        before = model(batch, null_candidate_index=null_index).retrieval_log_probs.exp().double()  # [B, K]
    assert null_index == 0
    retrieved = batch["candidate_block_ids"].cpu()  # [B, K], -1 for ∅
    index_embeddings = trainer.index.get_embeddings(retrieved[:, 1:]).clone()  # [B, K-1, D], what the index stored

    # the document tower changes (as training changes it), the query tower does not, the index is not rebuilt
    with torch.no_grad():
        for parameter in retriever.doc_embedder.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    with torch.no_grad():
        batch, null_index = trainer.retrieve_and_collate(examples)
        after = model(batch, null_candidate_index=null_index).retrieval_log_probs.exp().double()
    # the query tower and the index are unchanged, so the same blocks are retrieved
    assert torch.equal(batch["candidate_block_ids"].cpu(), retrieved)
    assert torch.equal(trainer.index.get_embeddings(retrieved[:, 1:]), index_embeddings)
    assert (after - before).abs().max() > 1e-2  # p(z|x) moved with the document tower

    # the trainer's (learned) ∅ prior: p(∅|x) = e^b / (K-1 + e^b), the retrieved blocks share the rest as a softmax
    # of the NEW tower's inner products with the query
    scores = scores_by_hand(trainer, examples, retrieved)  # [B, K]
    num_candidates = scores.shape[1]
    weight = math.exp(retriever.null_document_logit.item())
    null_mass = torch.full((len(examples),), weight / (num_candidates - 1 + weight), dtype=torch.float64)  # [B]
    torch.testing.assert_close(after[:, 0], null_mass, rtol=1e-5, atol=1e-6)
    fresh = torch.softmax(scores[:, 1:], dim=-1) * (1 - null_mass[:, None])  # [B, K-1]
    torch.testing.assert_close(after[:, 1:], fresh, rtol=1e-4, atol=1e-6)
    # ... and not as a softmax of the index's stored (stale) embeddings
    with torch.no_grad():
        query = retriever.embed_queries(batch["query_input_ids"], batch["query_attention_mask"]).double()  # [B, D]
    stale = torch.softmax(torch.einsum("bd,bkd->bk", query, index_embeddings.double()), -1) * (1 - null_mass[:, None])
    assert (after[:, 1:] - stale).abs().max() > 1e-2

    # the paper's ∅ (the empty block embedded by the document tower): every candidate's p(z|x), ∅ included, is the
    # softmax of the new tower's inner products
    retriever.config.null_document_score = "embedding"
    with torch.no_grad():
        embedded = model(batch, null_candidate_index=null_index).retrieval_log_probs.exp().double()
    torch.testing.assert_close(embedded, torch.softmax(scores, dim=-1), rtol=1e-4, atol=1e-6)
