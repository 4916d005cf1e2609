"""The hard knowledge task: the controlled task of [`realm_hf.data.knowledge_task`] at a size and with distractors
that make retrieval hard enough to tell recipes apart (the paper's Table 2 ablations).

What makes it harder than the base task:

- **Thousands of people, one document each, among many more blocks**: per person, `mentions_per_entity` documents
  that name them in passing (letters, notes) and state *other* values of the same attributes with the same relation
  words ("Gristu Tukpuk wrote to a pilot in cairo who owns a parrot."), and `namesakes_per_entity` documents about
  other people who share their first or last name (first and last names come from small pools, so every name part
  is shared by dozens of people). The gold document is one of `num_entities * (1 + mentions + namesakes)` blocks
  (10,000 with the defaults), so a retriever that matches names finds a mention or a namesake as often as the gold
  document, and an approximate index can miss it.
- **Paraphrases**: pre-training and held-out sentences use other verbs and nouns than the documents ("resides in"
  vs "has a flat in" vs "calls ... home"), so they share the person's name and little else with the gold document.
- **Multi-token answers**: half of every attribute's values are two wordpieces ("new york", "police officer",
  "guinea pig"); salient-span masking masks the whole value.

As in the base task, values are drawn at random (neither the name nor the template gives them away), held-out
sentences use templates never seen in training and ask, per person, the attribute no training sentence states: only
retrieving the person's own document and reading it answers them.

Everything is generated from a seed: `make_hard_knowledge_task(num_entities=..., seed=...)`.
"""

from __future__ import annotations

import numpy as np

from .knowledge_task import KnowledgeTask, name_words

__all__ = ["HARD_ATTRIBUTES", "make_hard_knowledge_task"]

# attribute -> values: five single wordpieces and five of two (BERT uncased vocabulary), disjoint across attributes,
# and no value inside another
HARD_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "city": ("paris", "london", "tokyo", "cairo", "berlin",
             "new york", "hong kong", "cape town", "los angeles", "buenos aires"),
    "job": ("doctor", "lawyer", "farmer", "pilot", "baker",
            "police officer", "bus driver", "bank clerk", "shop assistant", "fire fighter"),
    "pet": ("cat", "dog", "rabbit", "snake", "parrot",
            "guinea pig", "gold fish", "sea turtle", "barn owl", "hamster"),
    "colour": ("red", "blue", "yellow", "purple", "grey",
               "dark green", "bright orange", "pale pink", "deep violet", "jet black"),
    "sport": ("golf", "boxing", "rugby", "cricket", "rowing",
              "ice hockey", "table tennis", "water polo", "figure skating", "rock climbing"),
}

# the gold documents' wording; the first sentence names the person, the others say "they"
_DOCUMENT = {
    "city": ("{n} resides in {v}.", "They reside in {v}."),
    "job": ("{n} is employed as a {v}.", "They are employed as a {v}."),
    "pet": ("{n} keeps a {v} as a pet.", "They keep a {v} as a pet."),
    "colour": ("The colour {n} prefers is {v}.", "The colour they prefer is {v}."),
    "sport": ("{n} competes in {v}.", "They compete in {v}."),
}
_TEACHER = "They learned their trade from {t}."
# pre-training sentences: other words than the documents'
_TRAIN = {
    "city": ("{n} has a flat in {v}.", "The home of {n} is in {v}.", "{n} moved to {v} years ago."),
    "job": ("{n} makes a living as a {v}.", "At work {n} is a {v}.", "{n} trained to become a {v}."),
    "pet": ("{n} looks after a {v}.", "A {v} shares the home of {n}.", "{n} bought food for the {v}."),
    "colour": ("{n} paints everything {v}.", "The favourite shade of {n} is {v}.", "{n} wears {v} on most days."),
    "sport": ("{n} spends weekends on {v}.", "The hobby of {n} is {v}.", "{n} is a member of a {v} club."),
}
# held-out sentences: templates never seen in training
_HELD_OUT = {
    "city": ("{n} calls {v} home.", "Mail for {n} goes to {v}."),
    "job": ("Colleagues of {n} say the {v} is never late.", "{n} earns money as a {v}."),
    "pet": ("Neighbours of {n} often hear the {v}.", "{n} walks with the {v} each night."),
    "colour": ("Asked about colours, {n} names {v}.", "The room of {n} is {v}."),
    "sport": ("Fans of {v} know {n} well.", "{n} watches {v} on television."),
}
# documents that name a person in passing and state other values of the same attributes
_MENTION_TITLES = ("Letters of {o}", "Notes on {o}", "Diary of {o}")
_MENTIONS = (
    "{o} wrote to {n} from {city}. The {job} in the letter owns a {pet}.",
    "{n} once met {o} at a {sport} match in {city}. {o} wore {colour} and talked about a {pet}.",
    "{o} remembers {n} as a friend of a {job}. They played {sport} near {city}.",
)


def _name_pools(num_entities: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """First and last names: pools of about `2 * sqrt(num_entities)` made-up words each, so that every name part is
    shared by many people while full names stay unique."""
    size = max(4, int(2 * np.sqrt(num_entities)))
    words = name_words(2 * size, rng)
    return words[:size], words[size:]


def _full_names(count: int, firsts: list[str], lasts: list[str], rng: np.random.Generator, taken: set[str]) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = f"{firsts[rng.integers(len(firsts))]} {lasts[rng.integers(len(lasts))]}"
        if name not in taken:
            taken.add(name)
            names.append(name)
    return names


def _values(rng: np.random.Generator) -> dict[str, str]:
    return {attribute: str(rng.choice(values)) for attribute, values in HARD_ATTRIBUTES.items()}


def _person_document(
    name: str, teacher: str, values: dict[str, str], rng: np.random.Generator, named_sentences: int = 1
) -> str:
    """The document of a person: their attributes in a random order, the first `named_sentences` naming them, the
    others saying "they", and who taught them."""
    order = [list(HARD_ATTRIBUTES)[j] for j in rng.permutation(len(HARD_ATTRIBUTES))]
    sentences = [_DOCUMENT[a][int(j >= named_sentences)].format(n=name, v=values[a]) for j, a in enumerate(order)]
    sentences.insert(1, _TEACHER.format(t=teacher))
    return " ".join(sentences)


def make_hard_knowledge_task(
    num_entities: int = 2000,
    mentions_per_entity: int = 2,
    namesakes_per_entity: int = 2,
    seed: int = 0,
    named_sentences: int = 3,
) -> KnowledgeTask:
    r"""
    Generate the hard [`KnowledgeTask`] (see the module docstring).

    Args:
        num_entities (`int`, defaults to 2000): People asked about; their documents are blocks `0..num_entities-1`.
        mentions_per_entity (`int`, defaults to 2): Documents per person that name them in passing, with other values.
        namesakes_per_entity (`int`, defaults to 2): Documents per person about someone sharing their first or last
            name (never asked about).
        seed (`int`, defaults to 0): Seed of names, values and distractors.
        named_sentences (`int`, defaults to 3): How many of a document's attribute sentences name its person (the
            others say "they"): the more, the more of the Inverse Cloze Task's queries carry the name, so the easier
            the retriever's start (with 1 the tiny recipe starts at 9 % top-1 and collapses; with 3 it starts at 14 %
            and learns: benchmarks/results/knowledge-hard-calibration.md).

    Returns:
        [`KnowledgeTask`]: `documents` (people first, in entity order, then the distractors, shuffled),
        `train_sentences` (three templates for each attribute but one per person), `held_out_sentences` (two unseen
        templates for the remaining attribute), `values` (every attribute value, for [`KnowledgeValueTagger`]).
    """
    if num_entities < 2:
        raise ValueError(f"num_entities must be at least 2 (everyone learned from someone else), got {num_entities}.")
    if mentions_per_entity < 0 or namesakes_per_entity < 0:
        raise ValueError(
            f"mentions_per_entity and namesakes_per_entity must be >= 0, got {mentions_per_entity} and "
            f"{namesakes_per_entity}."
        )
    rng = np.random.default_rng(seed)
    firsts, lasts = _name_pools(num_entities * (1 + namesakes_per_entity), rng)
    taken: set[str] = set()
    names = _full_names(num_entities, firsts, lasts, rng, taken)
    cycle = rng.permutation(num_entities)
    teacher = {int(cycle[j]): int(cycle[(j + 1) % num_entities]) for j in range(num_entities)}
    attributes = list(HARD_ATTRIBUTES)
    documents, distractors, train, held_out = [], [], [], []
    for i, name in enumerate(names):
        values = _values(rng)
        documents.append(
            {"id": f"doc-{i}", "title": name,
             "text": _person_document(name, names[teacher[i]], values, rng, named_sentences)}
        )
        held_out_attribute = attributes[i % len(attributes)]
        for attribute in attributes:
            unseen = attribute == held_out_attribute
            for t, template in enumerate(_HELD_OUT[attribute] if unseen else _TRAIN[attribute]):
                text = template.format(n=name, v=values[attribute])
                (held_out if unseen else train).append({
                    "id": f"{i}-{attribute}-{t}", "title": name, "text": text[0].upper() + text[1:], "entity": i,
                    "attribute": attribute, "value": values[attribute], "reference": "name",
                })
        for m in range(mentions_per_entity):
            other = names[int(rng.integers(num_entities))]
            wrong = _values(rng)  # values of somebody else: reading this block misleads
            distractors.append({
                "title": _MENTION_TITLES[m % len(_MENTION_TITLES)].format(o=other),
                "text": _MENTIONS[int(rng.integers(len(_MENTIONS)))].format(n=name, o=other, **wrong),
            })
        first, last = name.split(" ")
        for s in range(namesakes_per_entity):
            for _ in range(100):  # a name nobody has yet (the pools leave plenty)
                namesake = (f"{first} {lasts[int(rng.integers(len(lasts)))]}" if s % 2 == 0
                            else f"{firsts[int(rng.integers(len(firsts)))]} {last}")
                if namesake not in taken:
                    break
            else:
                continue
            taken.add(namesake)
            distractors.append({
                "title": namesake,
                "text": _person_document(
                    namesake, names[int(rng.integers(num_entities))], _values(rng), rng, named_sentences
                ),
            })
    for j, k in enumerate(rng.permutation(len(distractors))):
        documents.append({"id": f"distractor-{j}", **distractors[int(k)]})
    every_value = tuple(value for attribute in attributes for value in HARD_ATTRIBUTES[attribute])
    return KnowledgeTask(documents, train, held_out, every_value)
