"""How `realm-hf` prints what it retrieves and answers (`search`, `ask` and the demos)."""

from __future__ import annotations

__all__ = ["evidence_snippet", "print_answers", "print_hits"]


def print_hits(query: str, hits: list[dict]) -> None:
    """Print a query and its retrieved blocks, one line each (rank, title, block id, score, the text's start)."""
    print(f"\nQ: {query}")
    for rank, hit in enumerate(hits, 1):
        snippet = hit["text"][:160].replace("\n", " ")
        print(f"  {rank}. [{hit['title']}] (block {hit['block_id']}, score {hit['score']:.3f}) {snippet}...")


def evidence_snippet(evidence: str, width: int = 120) -> str:
    """The part of `evidence` around the marked answer (`**answer**`), at most `width` characters each side."""
    text = " ".join(evidence.split())
    start = text.find("**")
    end = text.find("**", start + 2) + 2 if start >= 0 else -1
    if start < 0 or end < 2:
        return text[: 2 * width] + ("..." if len(text) > 2 * width else "")
    left, right = max(0, start - width), min(len(text), end + width)
    return ("..." if left > 0 else "") + text[left:right] + ("..." if right < len(text) else "")


def print_answers(question: str, answers: list[dict]) -> None:
    """Print a question and the Open-QA pipeline's answers, each with its source block and evidence snippet."""
    print(f"Q: {question}")
    if not answers or answers[0]["answer"] is None:
        print("A: (no answer: no retrieved block holds a readable span)")
        return
    for rank, answer in enumerate(answers, 1):
        label = "A:" if len(answers) == 1 else f"A{rank}:"
        print(f"{label} {answer['answer']}  (score {answer['score']:.4f})")
        print(f"   source: {answer['title']} (block {answer['block_id']})")
        print(f"   evidence: {evidence_snippet(answer['evidence'])}")
