"""chaii - Hindi and Tamil Question Answering: MLE-bench's split of the answered questions, and synthetic ones.

MLE-bench holds out a tenth of Kaggle's questions (seed 0); the answers keep only the id and the
answer text, renamed `PredictionString`, and a submission is graded by scikit-learn's
sample-averaged Jaccard score of the lowercased word sets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mle_gym.competitions.text_data import hex_ids, split_tenth
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading.text_metrics import mean_sample_jaccard
from mle_gym.grading.validation import validate_standard

ID, TARGET = "id", "PredictionString"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Public: train.csv, test.csv (no answer), sample_submission.csv ("dummy text"); private: test.csv (id, answer)."""
    new_train, new_test = split_tenth(raw)
    answers = new_test[[ID, "answer_text"]].set_axis([ID, TARGET], axis=1)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=["answer_start", "answer_text"]).to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(**{TARGET: "dummy text"}).to_csv(public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`id` and `PredictionString` (other columns ignored), the test ids once each, text or blanks.

    A blank is no words, as MLE-bench reads it; but a file whose every prediction is blank is
    refused (MLE-bench scores it 0). A number is refused where pandas read it as one (a column of
    numbers only, e.g. years): MLE-bench's grader can only lowercase text.
    """
    aligned = validate_standard(submission, answers, id_column=ID, target_columns=[TARGET], numeric_targets=False)
    values = aligned[TARGET]
    blank = values.isna().to_numpy()
    if blank.all():
        raise InvalidSubmissionError(
            f"column {TARGET!r}: every prediction is blank; expected the answer text for at least one question"
        )
    not_text = np.flatnonzero(~blank & ~values.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool))
    if len(not_text):
        raise InvalidSubmissionError(
            f"column {TARGET!r}: expected text; found {len(not_text)} value(s) read as numbers, e.g. "
            f"{values.tolist()[not_text[0]]!r} (pandas reads a column of numbers only as numbers)"
        )
    return aligned


def _texts(column: pd.Series) -> list[str]:
    return column.astype(object).fillna("").tolist()


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The mean over questions of |predicted words ∩ answer words| / |their union| (0 where both are empty)."""
    truth = _texts(answers[TARGET])
    if not all(isinstance(text, str) for text in truth):
        raise ValueError(f"the answers' {TARGET!r} must be text; pandas read numbers there")
    return mean_sample_jaccard(_texts(aligned[TARGET]), truth)


# Synthetic passages: facts about people (a birth year, a home town) among filler sentences; the
# question asks for one fact, whose answer is a span of the passage.
_LANG = {
    "hindi": {
        "names": ("अशोक", "मीरा", "कबीर", "सावित्री", "रवि", "लता", "विक्रम", "अनुराधा"),
        "places": ("दिल्ली", "पटना", "जयपुर", "लखनऊ", "भोपाल", "वाराणसी", "इंदौर", "कानपुर"),
        "born": "{name} का जन्म {year} में हुआ था।", "lived": "{name} कई वर्षों तक {place} में रहे।",
        "ask_born": "{name} का जन्म कब हुआ था?", "ask_lived": "{name} कहाँ रहे?",
        "filler": ("यह एक पुरानी कहानी है।", "लोग वहाँ बहुत खुश थे।", "नदी के किनारे एक बड़ा मेला लगता था।",
                   "उस समय व्यापार तेजी से बढ़ा।", "कई लेखकों ने इस विषय पर लिखा।"),
    },
    "tamil": {
        "names": ("அருண்", "மீனா", "கண்ணன்", "லட்சுமி", "ராஜா", "வள்ளி", "செல்வம்", "கவிதா"),
        "places": ("சென்னை", "மதுரை", "கோயம்புத்தூர்", "திருச்சி", "சேலம்", "வேலூர்", "தஞ்சாவூர்", "ஈரோடு"),
        "born": "{name} {year} ஆம் ஆண்டு பிறந்தார்.", "lived": "{name} பல ஆண்டுகள் {place} நகரில் வாழ்ந்தார்.",
        "ask_born": "{name} எப்போது பிறந்தார்?", "ask_lived": "{name} எங்கு வாழ்ந்தார்?",
        "filler": ("இது ஒரு பழைய கதை.", "மக்கள் மகிழ்ச்சியாக இருந்தனர்.", "ஆற்றின் கரையில் பெரிய சந்தை இருந்தது.",
                   "அந்த காலத்தில் வணிகம் வளர்ந்தது.", "பல எழுத்தாளர்கள் இதைப் பற்றி எழுதினர்."),
    },
}


def _example(rng: np.random.Generator, language: str, ask_place: bool) -> tuple[str, str, str, int]:
    words = _LANG[language]
    people = rng.choice(len(words["names"]), size=3, replace=False)
    sentences, facts = [], []
    for k in people:
        name = words["names"][int(k)]
        year, place = str(int(rng.integers(1800, 2000))), words["places"][int(rng.integers(len(words["places"])))]
        facts.append((name, year, place))
        sentences += [words["born"].format(name=name, year=year), words["lived"].format(name=name, place=place)]
    sentences += [words["filler"][int(i)] for i in rng.integers(len(words["filler"]), size=int(rng.integers(2, 6)))]
    order = rng.permutation(len(sentences))
    context = " ".join(sentences[int(i)] for i in order)
    name, year, place = facts[int(rng.integers(len(facts)))]
    key, answer = ("lived", place) if ask_place else ("born", year)
    fact = words[key].format(name=name, year=year, place=place)
    start = context.index(fact) + fact.index(answer)
    return context, words["ask_" + key].format(name=name), answer, start


def make_raw(raw: Path, seed: int, n: int = 100, n_hidden: int = 5) -> None:
    """Kaggle's download: train.csv (id, context, question, answer_text, answer_start, language), test.csv,
    sample_submission.csv."""
    rng = np.random.default_rng(seed)
    ids = hex_ids(rng, n + n_hidden, 9)
    languages = rng.choice(["hindi", "tamil"], size=n + n_hidden, p=[0.67, 0.33])
    ask_place = rng.random(n + n_hidden) < 0.5
    _, held_out = train_test_split(np.arange(n), test_size=0.1, random_state=0)
    ask_place[held_out[0]] = True  # some held-out answer is a word, so pandas reads the answers as text
    rows = [_example(rng, str(lang), bool(place)) for lang, place in zip(languages, ask_place)]
    frame = pd.DataFrame({ID: ids, "context": [r[0] for r in rows], "question": [r[1] for r in rows],
                          "answer_text": [r[2] for r in rows], "answer_start": [r[3] for r in rows],
                          "language": languages})
    frame.iloc[:n].to_csv(raw / "train.csv", index=False)
    frame.iloc[n:][[ID, "context", "question", "language"]].to_csv(raw / "test.csv", index=False)
    frame.iloc[n:][[ID]].assign(**{TARGET: ""}).to_csv(raw / "sample_submission.csv", index=False)


# Sample data is prepare(make_raw(seed, **SAMPLE_RAW)): 1,000 answered synthetic questions, 100 of them held out.
SAMPLE_RAW = {"n": 1000}
