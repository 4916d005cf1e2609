from realm_hf import RealmRetriever
from realm_hf.training import CorpusArguments, IctArguments, LoopArguments, ModelArguments
from realm_hf.training.ict import IctTrainer


def test_ict_trains_the_retriever_to_find_the_source_block(tmp_path):
    # A random 2-layer retriever learns in seconds only when the sentence stays in its block (ICT's 10% case);
    # with removal it needs the warm start of a real BERT, which the real run in the README uses.
    trainer = IctTrainer(
        LoopArguments(output_dir=str(tmp_path), max_steps=30, per_device_batch_size=8, learning_rate=1e-3,
                      logging_steps=6, save_steps=0, report_to="none"),
        ModelArguments(random_init=True, pooling="mean"),
        CorpusArguments(corpus="embedded", max_articles=40, block_length=64, query_max_length=32),
        IctArguments(remove_probability=0.0, temperature=0.1),
    )
    history = [r for r in trainer.train() if "loss" in r]
    assert history[-1]["loss"] < 0.2 * history[0]["loss"], history
    assert history[-1]["in_batch_accuracy"] >= history[0]["in_batch_accuracy"] + 0.25, history
    retriever = RealmRetriever.from_pretrained(tmp_path / "final")
    assert retriever.config.pooling == "mean" and retriever.config.embedding_size == 128
