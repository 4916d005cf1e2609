import pytest
import torch

from realm_hf import RealmRetriever, RealmRetrieverConfig


def make(tiny_bert, **kwargs):
    config = RealmRetrieverConfig(bert_config=tiny_bert, query_max_length=16, block_max_length=32, **kwargs)
    return RealmRetriever(config).eval()


def inputs(B=2, K=3):
    return torch.randint(5, 64, (B, 7)), torch.randint(5, 64, (B, K, 11))


def test_relevance_is_inner_product_of_tower_embeddings(tiny_bert):
    retriever = make(tiny_bert)
    query, candidates = inputs()
    out = retriever(query_input_ids=query, candidate_input_ids=candidates)
    q = retriever.embed_queries(query)
    d = retriever.embed_documents(candidates.view(-1, 11)).view(2, 3, -1)
    assert q.shape == (2, 128) and d.shape == (2, 3, 128)
    torch.testing.assert_close(out.relevance_scores, torch.einsum("bd,bkd->bk", q, d))
    # precomputed embeddings (as from the index) give the same scores
    from_index = retriever(query_input_ids=query, candidate_embeds=d)
    torch.testing.assert_close(from_index.relevance_scores, out.relevance_scores)


def test_shared_and_separate_towers(tiny_bert):
    shared = make(tiny_bert, share_towers=True)
    separate = make(tiny_bert, share_towers=False)
    assert shared.doc_embedder is None and shared.document_embedder is shared.query_embedder
    assert separate.doc_embedder is not None
    query, candidates = inputs()
    separate.train()
    separate(query_input_ids=query, candidate_input_ids=candidates).relevance_scores.sum().backward()
    assert separate.query_embedder.projection.weight.grad.abs().sum() > 0
    assert separate.doc_embedder.projection.weight.grad.abs().sum() > 0


def test_candidate_embeds_train_only_query_tower(tiny_bert):
    retriever = make(tiny_bert, share_towers=False)
    query, _ = inputs()
    retriever(query_input_ids=query, candidate_embeds=torch.randn(2, 3, 128)).relevance_scores.sum().backward()
    assert retriever.query_embedder.projection.weight.grad is not None
    assert retriever.doc_embedder.projection.weight.grad is None


@pytest.mark.parametrize("pooling", ["cls", "pooler", "mean"])
def test_pooling_modes(tiny_bert, pooling):
    retriever = make(tiny_bert, pooling=pooling, projection_size=None, normalize_embeddings=True)
    query = torch.randint(5, 64, (2, 7))
    mask = torch.ones_like(query)
    mask[1, 4:] = 0
    embeds = retriever.embed_queries(query, attention_mask=mask)
    assert embeds.shape == (2, 32)
    torch.testing.assert_close(embeds.norm(dim=-1), torch.ones(2))
    # padding does not change a query's embedding
    torch.testing.assert_close(embeds[1:], retriever.embed_queries(query[1:, :4]), rtol=1e-5, atol=1e-5)


def test_bad_inputs(tiny_bert):
    retriever = make(tiny_bert)
    query, candidates = inputs()
    with pytest.raises(ValueError, match="exactly one"):
        retriever(query_input_ids=query)
    with pytest.raises(ValueError, match=r"\[B, K, L\]"):
        retriever(query_input_ids=query, candidate_input_ids=candidates[:, 0])
    with pytest.raises(ValueError, match="candidate sets"):
        retriever(query_input_ids=query, candidate_input_ids=candidates[:1])
    with pytest.raises(ValueError, match="dimensions"):
        retriever(query_input_ids=query, candidate_embeds=torch.randn(2, 3, 64))
    with pytest.raises(ValueError, match="empty"):
        retriever(query_input_ids=query, candidate_input_ids=candidates[:, :0])


def test_from_bert_packaged_minilm_matches_sentence_embeddings():
    """MiniLM loaded with mean pooling, no projection and normalization reproduces its own sentence embeddings."""
    from transformers import AutoTokenizer, BertModel

    from realm_hf.modeling.initial_weights import packaged_minilm_path

    path = packaged_minilm_path()
    retriever = RealmRetriever.from_bert(path, projection_size=None, pooling="mean", normalize_embeddings=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    batch = tokenizer(["who wrote hamlet", "the capital of france is paris"], padding=True, return_tensors="pt")
    bert = BertModel.from_pretrained(path).eval()
    with torch.no_grad():
        hidden = bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
        ours = retriever.embed_queries(**batch)
        docs = retriever.embed_documents(**batch)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(docs, expected, rtol=1e-5, atol=1e-5)


def test_similarity_scale_multiplies_the_relevance_scores_and_survives_save_load(tiny_bert, tmp_path):
    """Cosines of normalized embeddings lie in [-1, 1]: `similarity_scale` turns them into logits, the same weights."""
    plain = make(tiny_bert, normalize_embeddings=True)
    scaled = make(tiny_bert, normalize_embeddings=True, similarity_scale=20.0)
    scaled.load_state_dict(plain.state_dict())
    query, candidates = inputs()
    cosines = plain(query_input_ids=query, candidate_input_ids=candidates).relevance_scores  # [B, K]
    assert cosines.abs().max() <= 1.0 + 1e-5
    logits = scaled(query_input_ids=query, candidate_input_ids=candidates).relevance_scores
    torch.testing.assert_close(logits, 20.0 * cosines)
    # the embeddings (what the index stores and searches with) are unchanged: only p(z | x) sharpens
    torch.testing.assert_close(scaled.embed_queries(query), plain.embed_queries(query))
    scaled.save_pretrained(tmp_path)
    assert RealmRetriever.from_pretrained(tmp_path).config.similarity_scale == 20.0


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf"), True, "20"])
def test_bad_similarity_scale_is_refused_naming_the_value(tiny_bert, scale):
    with pytest.raises(Exception, match="similarity_scale"):
        make(tiny_bert, similarity_scale=scale)


def test_packaged_minilm_as_retriever_scores_with_its_training_scale():
    """`load_retriever("minilm")` (the demo, `realm-hf search`): p(z | x) = softmax(20 · cos), as MiniLM was trained."""
    from realm_hf.retrieval import load_retriever
    from realm_hf.modeling.initial_weights import SENTENCE_EMBEDDING_SCALE

    retriever, _ = load_retriever("minilm")
    assert retriever.config.normalize_embeddings and retriever.config.similarity_scale == SENTENCE_EMBEDDING_SCALE == 20
