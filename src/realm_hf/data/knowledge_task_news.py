"""The news variant of the hard knowledge task: pre-training sentences X written about the people as news reports
them, never sentences of the knowledge corpus Z (issue 45, REALM-News with X != Z).

Z is the hard task's corpus ([`make_hard_knowledge_task`]: each person's record among mentions and namesakes) plus
a **profile** per person, a second document stating the same five facts in other words ("Gristu Tukpuk has lived in
cairo for a decade. They work as a pilot. ..."). X and the held-out sentences combine two or three facts of a person
in one sentence, with wording that neither document uses, and mask one of them ("Gristu Tukpuk, who moved to cairo
years ago, was seen walking a [MASK] [MASK] in the park."). As in the hard task, values are drawn at random, no
training sentence states a person's held-out attribute, and held-out sentences ask exactly that attribute with frames
and phrases no training sentence uses: their other fact is one that training sentences state, so the blank can be
filled only by retrieving one of the person's two documents and reading it.

Why a second document: pre-training on Z's own sentences (X = Z) excludes each sentence's own block from its
candidates (the trivial candidate). In the hard task every fact is stated in one document only, so X = Z would find
the fact nowhere and could teach the retriever nothing: a comparison lost by construction. With a profile beside each
record, a named sentence of either document finds its fact in the other, so X = Z has the signal REALM learns from,
and both settings retrieve from the same Z and are measured on the same held-out sentences. A held-out sentence is
answered by either document: its rows carry `documents` (the block ids of the record and the profile), which
[`realm_hf.demo.knowledge_runs.held_out_examples`] passes on as `gold_block_ids`.

Which value is masked: salient-span masking masks one span chosen at random among those its tagger marks, and a news
sentence holds two or three values. [`NewsValueTagger`] marks only the sentence's own value (`value`) in the
sentences of X and the held-out ones, and every value elsewhere (Z's sentences, as [`KnowledgeValueTagger`] does).

Everything is generated from a seed: `make_news_knowledge_task(num_entities=..., seed=...)`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xxhash

from .knowledge_task import KnowledgeTask, KnowledgeValueTagger
from .knowledge_task_hard import HARD_ATTRIBUTES, make_hard_knowledge_task

__all__ = ["NewsValueTagger", "make_news_knowledge_task"]

# the profiles' wording: the first `named_sentences` name the person, the others say "they"
_PROFILE = {
    "city": ("{n} has lived in {v} for a decade.", "They have lived in {v} for a decade."),
    "job": ("{n} works as a {v}.", "They work as a {v}."),
    "pet": ("{n} owns a {v}.", "They own a {v}."),
    "colour": ("The favourite colour of {n} is {v}.", "Their favourite colour is {v}."),
    "sport": ("{n} plays {v} every weekend.", "They play {v} every weekend."),
}
# news sentences: a frame around "{n}, {appositions}, {predicate}"; one phrase set for X, another for held-out
_TRAIN_FRAMES = ("{s}.", "On Friday {s}.", "Witnesses said {s}.")
_TRAIN_APPOSITIONS = {
    "city": "who moved to {v}",
    "job": "a {v} by trade",
    "pet": "owner of a {v}",
    "colour": "dressed in {v}",
    "sport": "a {v} fan",
}
_TRAIN_PREDICATES = {
    "city": "flew back to {v}",
    "job": "spoke about being a {v}",
    "pet": "was seen walking a {v}",
    "colour": "wore a {v} coat",
    "sport": "was cheered at a {v} event",
}
_HELD_OUT_FRAMES = ("Sources confirm {s}.", "In an interview {s}.")
_HELD_OUT_APPOSITIONS = {
    "city": "whose address is in {v}",
    "job": "who is paid as a {v}",
    "pet": "whose {v} is well known",
    "colour": "who always picks {v}",
    "sport": "who never misses a {v} game",
}
_HELD_OUT_PREDICATES = {
    "city": "returned to {v}",
    "job": "was praised as a {v}",
    "pet": "took a {v} to the vet",
    "colour": "painted the door {v}",
    "sport": "watched a {v} final",
}


class NewsValueTagger(KnowledgeValueTagger):
    r"""
    Salient-span tagger of the news variant: in a sentence it knows (`targets`), only the value it asks; in any other
    text (the knowledge corpus), every attribute value, as [`KnowledgeValueTagger`].

    Args:
        values (`Sequence[str]`): The attribute values ([`KnowledgeTask.values`]).
        sentences (`Iterable[dict]`): Rows with `text` and the `value` to mask (the task's pre-training and held-out
            sentences). A text must name one value only once.
    """

    def __init__(self, values, sentences: Iterable[dict]):
        super().__init__(values)
        self.targets: dict[str, str] = {}
        for sentence in sentences:
            if self.targets.setdefault(sentence["text"], sentence["value"]) != sentence["value"]:
                raise ValueError(f"The sentence {sentence['text']!r} is given two values to mask; give it one.")

    @property
    def fingerprint(self) -> str:
        digest = xxhash.xxh64()
        for text in sorted(self.targets):
            digest.update(f"{text}\t{self.targets[text]}\n".encode())
        return f"{super().fingerprint};news-targets:{digest.hexdigest()}"

    def __call__(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        tagged = super().__call__(texts)
        return [
            [(s, e) for s, e in spans if text[s:e] == self.targets[text]] if text in self.targets else spans
            for text, spans in zip(texts, tagged)
        ]


def _profile(name: str, values: dict[str, str], rng: np.random.Generator, named_sentences: int) -> str:
    """A person's second document: their facts in the profiles' words, in a random order."""
    order = [list(HARD_ATTRIBUTES)[j] for j in rng.permutation(len(HARD_ATTRIBUTES))]
    return " ".join(_PROFILE[a][int(j >= named_sentences)].format(n=name, v=values[a]) for j, a in enumerate(order))


def _news_sentence(name: str, values: dict[str, str], target: str, context: list[str], frame: str,
                   appositions: dict[str, str], predicates: dict[str, str], rng: np.random.Generator) -> str:
    """One sentence stating `target` and the `context` attributes: one of them (at random) as the predicate, the
    others as appositions after the name."""
    facts = [target, *context]
    predicate = facts.pop(int(rng.integers(len(facts))))
    clauses = " and ".join(appositions[a].format(v=values[a]) for a in facts)
    return frame.format(s=f"{name}, {clauses}, {predicates[predicate].format(v=values[predicate])}")


def make_news_knowledge_task(
    num_entities: int = 2000,
    mentions_per_entity: int = 2,
    namesakes_per_entity: int = 2,
    seed: int = 0,
    named_sentences: int = 3,
    sentences_per_fact: int = 2,
) -> KnowledgeTask:
    r"""
    Generate the news variant of the hard [`KnowledgeTask`] (see the module docstring).

    Args:
        num_entities (`int`, defaults to 2000): People asked about; their records are blocks `0..num_entities-1`, their
            profiles blocks `num_entities..2 * num_entities - 1` (each document is one block at the task's shapes).
        mentions_per_entity (`int`, defaults to 2): As in [`make_hard_knowledge_task`].
        namesakes_per_entity (`int`, defaults to 2): As in [`make_hard_knowledge_task`].
        seed (`int`, defaults to 0): Seed of the hard task and of the news sentences.
        named_sentences (`int`, defaults to 3): How many attribute sentences of a record and of a profile name their
            person (the others say "they").
        sentences_per_fact (`int`, defaults to 2): Pre-training sentences per person and trained attribute (each in
            another frame, with one or two other trained facts of the person beside it).

    Returns:
        [`KnowledgeTask`]: `documents` (records, then profiles, then the hard task's distractors), `train_sentences`
        (news sentences masking each attribute of a person but one), `held_out_sentences` (two per person, masking
        that one, in unseen frames and phrases), `values`; every sentence row has `documents`, the block ids of its
        person's record and profile.
    """
    if not 1 <= sentences_per_fact <= len(_TRAIN_FRAMES):
        raise ValueError(
            f"sentences_per_fact must be in [1, {len(_TRAIN_FRAMES)}] (one frame each), got {sentences_per_fact}."
        )
    hard = make_hard_knowledge_task(num_entities, mentions_per_entity, namesakes_per_entity, seed, named_sentences)
    values: dict[int, dict[str, str]] = {i: {} for i in range(num_entities)}
    held_out_attribute: dict[int, str] = {}
    for sentence in hard.train_sentences + hard.held_out_sentences:
        values[sentence["entity"]][sentence["attribute"]] = sentence["value"]
    for sentence in hard.held_out_sentences:
        held_out_attribute[sentence["entity"]] = sentence["attribute"]
    rng = np.random.default_rng([seed, 45])  # a stream of its own: the hard task's documents stay as they are
    people, distractors = hard.documents[:num_entities], hard.documents[num_entities:]
    profiles = [
        {"id": f"profile-{i}", "title": p["title"], "text": _profile(p["title"], values[i], rng, named_sentences)}
        for i, p in enumerate(people)
    ]
    train, held_out = [], []
    for i, person in enumerate(people):
        name, unseen = person["title"], held_out_attribute[i]
        trained = [a for a in HARD_ATTRIBUTES if a != unseen]
        row = {"title": name, "entity": i, "reference": "name", "documents": [i, num_entities + i]}
        used: set[str] = set()  # one text, one masked value (the same facts in the same frame mask one of them)
        for target in trained:
            others = [a for a in trained if a != target]
            for t, f in enumerate(rng.permutation(len(_TRAIN_FRAMES))[:sentences_per_fact]):
                for _ in range(100):
                    # three facts in the bare frame only: sentences stay within the queries' 30 wordpieces
                    facts = 1 + int(f == 0 and rng.random() < 0.5)
                    context = [others[int(j)] for j in rng.permutation(len(others))[:facts]]
                    text = _news_sentence(name, values[i], target, context, _TRAIN_FRAMES[int(f)], _TRAIN_APPOSITIONS,
                                          _TRAIN_PREDICATES, rng)
                    if text not in used:
                        break
                else:
                    raise RuntimeError(f"No sentence for {name}'s {target} that another one does not already say.")
                used.add(text)
                train.append({"id": f"{i}-{target}-{t}", "text": text, "attribute": target, "value": values[i][target],
                              **row})
        for t, frame in enumerate(_HELD_OUT_FRAMES):
            context = [trained[int(rng.integers(len(trained)))]]
            text = _news_sentence(name, values[i], unseen, context, frame, _HELD_OUT_APPOSITIONS, _HELD_OUT_PREDICATES,
                                  rng)
            held_out.append({"id": f"{i}-{unseen}-{t}", "text": text, "attribute": unseen, "value": values[i][unseen],
                             **row})
    return KnowledgeTask(people + profiles + distractors, train, held_out, hard.values)
