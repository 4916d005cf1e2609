"""A controlled knowledge task: can REALM pre-training teach a retriever from the masked-LM signal alone?

Fictional people, one document each, hold attributes (home city, job, pet, favourite colour, sport), and each was
taught by another person, which only their own document says: "Gristu Tukpuk lives in dublin. They were taught by
Bupem Zursik. They work as a soldier. ..." Pre-training sentences restate one attribute with its value masked, naming
the person ("Gristu Tukpuk has a house in [MASK].") or, in the relational variant, the teacher ("The student of
Bupem Zursik has a house in [MASK]."). The value can be predicted only by reading the person's document (values are drawn
at random, so neither names nor templates give them away).

Held-out sentences use templates never seen in training and ask, for each person, an attribute that no training
sentence states, so memorizing facts in the encoder's weights does not help: only retrieval + reading does. The
teacher sentence names another person twice, so a retriever that matches names anywhere in a block is distracted;
the masked-LM signal (the person's own block predicts the value, the teacher's student's block does not) teaches it
which block is *about* the person.

The relational variant (`relational=True`) also names people through their teacher, and its held-out sentences only
so: a retriever that matches names then finds the teacher's own block (titled with the name) instead of the
student's, and has to learn that "the student of X" is answered by the block that says "taught by X".

Everything is generated from a seed: `make_knowledge_task(num_entities=..., seed=...)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ATTRIBUTES", "KnowledgeTask", "KnowledgeValueTagger", "make_knowledge_task", "name_words"]

# attribute -> values; every value is a single lower-case wordpiece of the BERT uncased vocabulary, and the value sets
# are disjoint, so a masked value is one token and its attribute is told by the template, not by the value
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "city": ("paris", "london", "tokyo", "cairo", "berlin", "madrid", "rome", "moscow", "dublin", "vienna"),
    "job": ("doctor", "lawyer", "farmer", "pilot", "teacher", "baker", "painter", "singer", "soldier", "writer"),
    "pet": ("cat", "dog", "horse", "rabbit", "tiger", "wolf", "eagle", "snake", "bear", "fox"),
    "colour": ("red", "blue", "green", "yellow", "purple", "orange", "white", "black", "pink", "brown"),
    "sport": ("tennis", "golf", "boxing", "rugby", "cricket", "hockey", "baseball", "cycling", "rowing", "skiing"),
}

# how a document states an attribute ({n} the person, {v} the value): the first sentence names the person, the
# others say "they"
_DOCUMENT_TEMPLATES = {
    "city": ("{n} lives in {v}.", "They live in {v}."),
    "job": ("{n} works as a {v}.", "They work as a {v}."),
    "pet": ("{n} owns a {v}.", "They own a {v}."),
    "colour": ("The favourite colour of {n} is {v}.", "Their favourite colour is {v}."),
    "sport": ("{n} plays {v} every weekend.", "They play {v} every weekend."),
}
_TEACHER_SENTENCE = "They were taught by {t}, and {t} is proud of them."
# pre-training sentences, other wordings than the document's ({n}: the name, or "the student of <teacher>")
_TRAIN_TEMPLATES = {
    "city": ("{n} has a house in {v}.", "Every morning {n} walks through the streets of {v}."),
    "job": ("By profession {n} is a {v}.", "{n} earns a living as a {v}."),
    "pet": ("At home {n} feeds a {v}.", "{n} takes good care of a {v}."),
    "colour": ("{n} likes the colour {v} best.", "Most clothes of {n} are {v}."),
    "sport": ("On sundays {n} goes to play {v}.", "{n} trains for {v} twice a week."),
}
# held-out sentences: templates never seen in training
_HELD_OUT_TEMPLATES = {
    "city": ("Friends visit {n} in {v}.", "If you look for {n}, go to {v}."),
    "job": ("Everyone knows {n} as a {v}.", "For years {n} has worked as a {v}."),
    "pet": ("Each evening {n} walks the {v}.", "A {v} waits for {n} at the door."),
    "colour": ("Ask {n} and the answer is {v}.", "Over any other colour {n} would choose {v}."),
    "sport": ("Above all {n} is a keen fan of {v}.", "In summer {n} spends hours at {v}."),
}
_STUDENT_OF = "the student of {t}"

# made-up syllables, so that names are not in anyone's prior knowledge
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kl", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "n", "r", "l", "s", "k", "m")


@dataclass
class KnowledgeTask:
    r"""
    A generated knowledge task.

    Attributes:
        documents (`list[dict]`): The knowledge corpus Z: articles `{"id", "title", "text"}`, one per person (title =
            the person's name).
        train_sentences (`list[dict]`): The pre-training corpus X: `{"id", "title", "text", "entity", "attribute",
            "value", "reference"}`, one sentence per row; `entity` is the index of the gold document, the value is
            what gets masked, `reference` says how the person is named (`"name"` or `"teacher"`).
        held_out_sentences (`list[dict]`): Same fields; unseen templates, the person named through the teacher, and
            per person an attribute that no training sentence states.
        values (`tuple[str, ...]`): Every attribute value (what [`KnowledgeValueTagger`] marks as salient).
    """

    documents: list[dict]
    train_sentences: list[dict]
    held_out_sentences: list[dict]
    values: tuple[str, ...] = field(default_factory=tuple)


class KnowledgeValueTagger:
    r"""
    Salient-span tagger for a [`KnowledgeTask`]: marks the attribute value of a sentence, so that
    [`realm_hf.data.build_masked_dataset`]'s salient-span masking masks exactly the fact to be retrieved.

    Args:
        values (`Sequence[str]`): The attribute values ([`KnowledgeTask.values`]).
    """

    def __init__(self, values):
        self.values = tuple(sorted(set(values)))
        longest_first = sorted(self.values, key=lambda value: (-len(value), value))  # "table tennis" before "tennis"
        self._pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, longest_first)) + r")\b")

    @property
    def fingerprint(self) -> str:
        return "knowledge-values:" + ",".join(self.values)

    def __call__(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        return [[match.span() for match in self._pattern.finditer(text)] for text in texts]


def _word(rng: np.random.Generator) -> str:
    """A made-up capitalized word of two syllables."""
    syllables = [rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(2)]
    return "".join(syllables).capitalize()


def name_words(count: int, rng: np.random.Generator) -> list[str]:
    """`count` distinct made-up words (name parts), in a seeded order."""
    words: set[str] = set()
    while len(words) < count:
        words.add(_word(rng))
    ordered = sorted(words)  # a set's own order changes from process to process (string hashing)
    return [ordered[i] for i in rng.permutation(len(ordered))]


def _names(count: int, rng: np.random.Generator) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        names.add(f"{_word(rng)} {_word(rng)}")
    # shuffled from their sorted order: a set's own order changes from process to process (string hashing)
    ordered = sorted(names)
    return [ordered[i] for i in rng.permutation(len(ordered))]


def make_knowledge_task(
    num_entities: int = 100, seed: int = 0, relational: bool = False, paraphrase: bool = True
) -> KnowledgeTask:
    r"""
    Generate a [`KnowledgeTask`].

    Args:
        num_entities (`int`, defaults to 100): People, hence documents.
        seed (`int`, defaults to 0): Seed of names, values and teachers.
        relational (`bool`, defaults to `False`): Whether sentences also name people through their teacher ("the
            student of X"): then each training template is used once by name and once through the teacher, and the
            held-out sentences name the person only through the teacher (the hard variant). Otherwise every sentence
            names the person, and the teacher sentence of each document is a distractor: it names another person
            twice, as often as the document names its own subject.
        paraphrase (`bool`, defaults to `True`): Whether sentences reword the documents (training and held-out
            templates differ from the documents' and from each other). `False` states each fact in the document's
            own words ("Gristu Tukpuk lives in [MASK]."), one sentence per fact: reading is then copying, which a tiny
            random encoder learns in seconds (the CI-sized version of the task).

    Returns:
        [`KnowledgeTask`]: per person, one document stating all its attributes and its teacher (the teachers are a
        random cyclic permutation: everyone teaches exactly one other person); training sentences for all attributes
        but one; held-out sentences (the held-out templates) for that one attribute.
    """
    if num_entities < 2:
        raise ValueError(f"num_entities must be at least 2 (everyone is taught by someone else), got {num_entities}.")
    rng = np.random.default_rng(seed)
    names = _names(num_entities, rng)
    cycle = rng.permutation(num_entities)
    teacher = {int(cycle[j]): int(cycle[(j + 1) % num_entities]) for j in range(num_entities)}
    attributes = list(ATTRIBUTES)
    documents, train, held_out = [], [], []
    for i, name in enumerate(names):
        values = {attribute: str(rng.choice(ATTRIBUTES[attribute])) for attribute in attributes}
        order = [attributes[j] for j in rng.permutation(len(attributes))]
        sentences = [_DOCUMENT_TEMPLATES[a][int(j > 0)].format(n=name, v=values[a]) for j, a in enumerate(order)]
        sentences.insert(1, _TEACHER_SENTENCE.format(t=names[teacher[i]]))
        documents.append({"id": f"doc-{i}", "title": name, "text": " ".join(sentences)})
        student_of = _STUDENT_OF.format(t=names[teacher[i]])
        held_out_attribute = attributes[i % len(attributes)]
        for attribute in attributes:
            references = ((name, "name"), (student_of, "teacher")) if relational else ((name, "name"),)
            own_words = (_DOCUMENT_TEMPLATES[attribute][0],)
            if attribute == held_out_attribute:
                who, how = references[-1]
                templates = _HELD_OUT_TEMPLATES[attribute] if paraphrase else own_words
                phrasings = [(template, who, how) for template in templates]
                target = held_out
            else:
                templates = _TRAIN_TEMPLATES[attribute] if paraphrase else own_words
                phrasings = [(t, who, how) for t in templates for who, how in references]
                target = train
            for t, (template, who, how) in enumerate(phrasings):
                text = template.format(n=who, v=values[attribute])
                target.append(
                    {
                        "id": f"{i}-{attribute}-{t}", "title": name, "text": text[0].upper() + text[1:],
                        "entity": i, "attribute": attribute, "value": values[attribute], "reference": how,
                    }
                )
    every_value = tuple(value for attribute in attributes for value in ATTRIBUTES[attribute])
    return KnowledgeTask(documents, train, held_out, every_value)
