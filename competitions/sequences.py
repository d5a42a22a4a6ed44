"""Synthetic data shared by the sequence competitions: sentences, tagged questions, notebooks, QA documents, gestures.

Each generator is deterministic given its numpy Generator and small by default; what it writes
is shaped like the real Kaggle files (column names, id formats, value ranges), not like their
content. Tokens come from small topic vocabularies so that the sample data is learnable.
"""

from __future__ import annotations

import numpy as np

TOPICS: dict[str, list[str]] = {
    "python": ["python", "list", "dict", "import", "pandas", "numpy", "loop", "function", "django", "class"],
    "javascript": ["javascript", "jquery", "dom", "click", "event", "node", "callback", "json", "ajax", "browser"],
    "c#": ["c#", ".net", "linq", "wpf", "asp.net", "visual-studio", "class", "generic", "async", "nuget"],
    "sql": ["sql", "mysql", "query", "join", "table", "index", "select", "database", "postgresql", "row"],
    "math": ["integral", "proof", "matrix", "limit", "prime", "group", "series", "probability", "vector", "field"],
    "linux": ["linux", "bash", "ubuntu", "kernel", "shell", "grep", "permissions", "ssh", "apt", "mount"],
}
"""Topic -> words; the first word doubles as the topic's main tag (lower case, no tabs or '&', like Kaggle's)."""

FILLER = ["the", "a", "of", "to", "and", "in", "is", "it", "for", "with", "on", "that", "this", "how", "i",
          "my", "can", "not", "when", "from", "but", "what", "be", "use", "get", "an", "do", "why"]

NEWS_WORDS = [
    "the", "of", "to", "and", "in", "said", "for", "that", "with", "from", "percent", "market", "government",
    "president", "company", "people", "police", "officials", "shares", "minister", "report", "season",
    "million", "billion", "yesterday", "economy", "elections", "spokesman", "investors", "analysts",
    "according", "statement", "announced", "thousands", "hospital", "football", "championship", "research",
    "students", "business", "security", "director", "national", "international", "expected", "because",
    "however", "official", "Obama", "London", "Monday", "Tuesday", "Washington", "U.S.", "'s", "n't", "$",
    "2008", "\"", ",", "(", ")", "3.5", "café", "naïve",
]
"""Tokens of the news-like sentences (punctuation is a token of its own, as in the billion-word corpus)."""


def sentence(rng: np.random.Generator, low: int = 3, high: int = 30) -> str:
    """A tokenised news-like sentence ending in a period (words separated by single spaces)."""
    n = int(rng.integers(low, high))
    words = [NEWS_WORDS[i] for i in rng.integers(0, len(NEWS_WORDS), size=max(n - 1, 1))]
    words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join([*words, "."])


def topic_text(rng: np.random.Generator, topic: str, n_words: int) -> str:
    """Words mixing a topic's vocabulary with filler words."""
    vocab = TOPICS[topic]
    picks = [vocab[int(rng.integers(len(vocab)))] if rng.random() < 0.4 else FILLER[int(rng.integers(len(FILLER)))]
             for _ in range(n_words)]
    return " ".join(picks)


def hex_id(rng: np.random.Generator, digits: int) -> str:
    """A random lower-case hexadecimal id of `digits` characters (never one pandas would read as a number)."""
    value = "".join("0123456789abcdef"[i] for i in rng.integers(0, 16, size=digits))
    if set(value) <= set("0123456789e"):  # "12e45678" would be read as a float
        value = "a" + value[1:]
    return value
