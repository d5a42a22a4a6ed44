"""Split facts, metric values worked out by hand and MLE-bench's validity rules for seven text competitions.

us-patent-phrase-to-phrase-matching, tweet-sentiment-extraction,
learning-agency-lab-automated-essay-scoring-2, lmsys-chatbot-arena, google-quest-challenge,
jigsaw-unintended-bias-in-toxicity-classification and chaii-hindi-and-tamil-question-answering.
The facts were read from MLE-bench's preparation and grading code and checked against it by a
differential run on synthetic downloads (see docs/fidelity.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions import Competition, find_competition, get_competition
from mle_gym.competitions.helpers import read_csv
from mle_gym.errors import InvalidSubmissionError
from mle_gym.grading import text_metrics
from mle_gym.grading.report import GradeReport
from synthetic import grade_file, prepared


def _packaged(name: str) -> pytest.MarkDecorator:
    """Skip where the competition's folder is not in this tree (parked until the shared tests accept it)."""
    return pytest.mark.skipif(find_competition(name) is None, reason=f"{name} is not packaged in this tree")


def _grade(comp: Competition, frame: pd.DataFrame | str, private: Path, tmp_path: Path) -> GradeReport:
    return grade_file(comp, private, frame, tmp_path)


def _held_out(raw: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return train_test_split(read_csv(raw / "train.csv"), test_size=0.1, random_state=0)


# -- us-patent-phrase-to-phrase-matching -------------------------------------------------------------
def test_us_patent_holds_out_a_tenth_with_seed_zero(tmp_path: Path) -> None:
    _, raw, public, private = prepared("us-patent", tmp_path, n=200, n_hidden=5)
    expected_train, expected_test = _held_out(raw)
    assert len(expected_test) == 20
    assert pd.read_csv(public / "train.csv")["id"].tolist() == expected_train["id"].tolist()
    answers = pd.read_csv(private / "test.csv")
    assert answers["id"].tolist() == expected_test["id"].tolist()
    assert list(answers.columns) == ["id", "anchor", "target", "context", "score"]
    assert list(pd.read_csv(public / "test.csv").columns) == ["id", "anchor", "target", "context"]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["id", "score"] and set(sample["score"]) == {0}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test.csv", "train.csv"]


def test_pearson_by_hand() -> None:
    # truth 0, 0.5, 1 and predictions 1, 2, 4: deviations (-0.5, 0, 0.5) and (-4/3, -1/3, 5/3),
    # r = (2/3 + 5/6) / sqrt(0.5 * 14/3) = 1.5 / sqrt(7/3) = 0.98198...
    assert text_metrics.pearson(np.array([0, 0.5, 1]), np.array([1.0, 2, 4])) == pytest.approx(1.5 / np.sqrt(7 / 3))


def test_us_patent_scores_constant_predictions_zero_and_matches_ids(tmp_path: Path) -> None:
    comp = get_competition("us-patent")
    answers = pd.DataFrame({"id": ["a1", "b2", "c3"], "score": [0.0, 0.5, 1.0]})
    shuffled = pd.DataFrame({"id": ["c3", "a1", "b2"], "score": [4.0, 1.0, 2.0]})
    assert comp.score(comp.validate(shuffled, answers), answers) == pytest.approx(0.98198050606)
    constant = shuffled.assign(score=0.25)  # MLE-bench: NaN, a valid score without a medal
    assert comp.score(comp.validate(constant, answers), answers) == 0.0
    for bad, message in ((shuffled.assign(score=[1.0, np.nan, 2.0]), "expected a number"),
                         (shuffled.assign(score=[1.0, np.inf, 2.0]), "finite"),
                         (shuffled.assign(id=["c3", "a1", "a1"]), "duplicate"),
                         (shuffled.drop(columns="score"), "missing column")):
        with pytest.raises(InvalidSubmissionError, match=message):
            comp.validate(bad, answers)


# -- tweet-sentiment-extraction ------------------------------------------------------------------
@_packaged("tweet-sentiment")
def test_tweet_holds_out_a_tenth_with_a_blank_sample(tmp_path: Path) -> None:
    _, raw, public, private = prepared("tweet-sentiment", tmp_path, n=150)
    expected_train, expected_test = _held_out(raw)
    answers = pd.read_csv(private / "test.csv")
    assert answers["textID"].tolist() == expected_test["textID"].tolist() and len(answers) == 15
    assert list(answers.columns) == ["textID", "text", "selected_text", "sentiment"]
    assert pd.read_csv(public / "train.csv")["textID"].tolist() == expected_train["textID"].tolist()
    assert list(pd.read_csv(public / "test.csv").columns) == ["textID", "text", "sentiment"]
    lines = (public / "sample_submission.csv").read_text().splitlines()
    assert lines[0] == "textID,selected_text" and all(line.endswith(",") for line in lines[1:])


def test_word_jaccard_by_hand() -> None:
    # {"so", "happy"} vs {"happy", "today!"}: 1 shared word of 3 distinct, case ignored; punctuation stays on
    # its word ("sad!" is not "sad"); two blanks are 0/0
    values = text_metrics.word_jaccards(["so Happy", "sad!", "", ""], ["happy today!", "sad", "x", "  "])
    assert values[:3].tolist() == pytest.approx([1 / 3, 0.0, 0.0]) and np.isnan(values[3])


@_packaged("tweet-sentiment")
def test_tweet_grading_blanks_numbers_and_undefined_rows() -> None:
    comp = get_competition("tweet-sentiment")
    answers = pd.DataFrame({"textID": ["a1", "b2", "c3"], "selected_text": ["so happy", "1.5 stars", np.nan]})
    sub = pd.DataFrame({"textID": ["c3", "b2", "a1"], "selected_text": ["nothing", 1.5, np.nan]})
    # a1: blank vs {so, happy} = 0; b2: the number 1.5 reads as "1.5", 1 of 2 words = 0.5; c3: 0 of 1 = 0
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx(0.5 / 3)
    both_blank = sub.assign(selected_text=["", "x", "y"])  # c3: blank answer and blank prediction
    with pytest.raises(InvalidSubmissionError, match="'c3'.*0/0"):
        comp.score(comp.validate(both_blank, answers), answers)
    with pytest.raises(InvalidSubmissionError, match="not test ids"):
        comp.validate(sub.assign(textID=["c3", "b2", "zz"]), answers)


# -- learning-agency-lab-automated-essay-scoring-2 ----------------------------------------------------
def test_essay_holds_out_a_tenth_and_draws_sample_scores_from_random_state_42(tmp_path: Path) -> None:
    _, raw, public, private = prepared("essay-scoring", tmp_path, n=120)
    expected_train, expected_test = _held_out(raw)
    answers = pd.read_csv(private / "answers.csv")
    assert answers["essay_id"].tolist() == expected_test["essay_id"].tolist() and len(answers) == 12
    assert list(answers.columns) == ["essay_id", "full_text", "score"]
    assert pd.read_csv(public / "train.csv")["essay_id"].tolist() == expected_train["essay_id"].tolist()
    assert list(pd.read_csv(public / "test.csv").columns) == ["essay_id", "full_text"]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["score"].tolist() == np.random.RandomState(42).randint(1, 7, size=12).tolist()
    assert sample["essay_id"].tolist() == answers["essay_id"].tolist()


def test_essay_kappa_by_hand_and_fractional_scores_are_invalid() -> None:
    comp = get_competition("essay-scoring")
    answers = pd.DataFrame({"essay_id": ["a", "b", "c"], "score": [1, 2, 3]})
    # predictions 1, 3, 3 (given out of order) for answers 1, 2, 3; weights (i - j)^2 over classes 1-3.
    # Observed: only b (2 -> 3) is off, weighted 1. Expected: outer(answer counts (1,1,1), predicted
    # counts (1,0,2)) / 3, weighted (0*1 + 4*2 + 1*1 + 1*2 + 4*1 + 0*2) / 3 = 15 / 3 = 5. kappa = 1 - 1/5
    sub = pd.DataFrame({"essay_id": ["c", "a", "b"], "score": [3.0, 1.0, 3.0]})
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx(0.8)
    with pytest.raises(InvalidSubmissionError, match="integer classes"):
        comp.score(comp.validate(sub.assign(score=[3.5, 1, 3]), answers), answers)


# -- lmsys-chatbot-arena -------------------------------------------------------------------------
ARENA = ["winner_model_a", "winner_model_b", "winner_tie"]


def test_arena_holds_out_a_tenth_and_hides_the_models(tmp_path: Path) -> None:
    _, raw, public, private = prepared("chatbot-arena", tmp_path, n=110)
    expected_train, expected_test = _held_out(raw)
    answers = pd.read_csv(private / "answers.csv")
    assert answers["id"].tolist() == expected_test["id"].tolist() and len(answers) == 11
    assert list(answers.columns) == list(expected_train.columns)
    assert list(pd.read_csv(public / "test.csv").columns) == ["id", "prompt", "response_a", "response_b"]
    lines = (public / "sample_submission.csv").read_text().splitlines()
    assert lines[0] == "id," + ",".join(ARENA)
    assert lines[1].endswith(",0.3333333333333333,0.3333333333333333,0.3333333333333333")


def test_arena_log_loss_by_hand_and_mle_benchs_row_sum_rounding() -> None:
    comp = get_competition("chatbot-arena")
    answers = pd.DataFrame({"id": [7, 3], "winner_model_a": [1, 0], "winner_model_b": [0, 0], "winner_tie": [0, 1]})
    sub = pd.DataFrame({"id": [3, 7], "winner_model_a": [0.2, 0.5], "winner_model_b": [0.3, 0.25],
                        "winner_tie": [0.5, 0.25]})
    # id 7 gave its winner 0.5 and id 3 its tie 0.5: -(ln 0.5 + ln 0.5) / 2 = ln 2
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx(np.log(2))
    sub.loc[0, "winner_tie"] += 4e-7  # sums to 1.0000004: rounds to 1, valid (numpy.isclose would agree)
    comp.validate(sub, answers)
    sub.loc[0, "winner_tie"] += 2e-7  # 1.0000006 rounds to 1.000001: invalid (numpy.isclose would accept it)
    with pytest.raises(InvalidSubmissionError, match="rounded to 6 decimals"):
        comp.validate(sub, answers)
    with pytest.raises(InvalidSubmissionError, match="above 1"):
        comp.validate(sub.assign(winner_model_a=[1.5, 0.5]), answers)


# -- google-quest-challenge ----------------------------------------------------------------------
def test_quest_holds_out_a_tenth_and_swaps_in_a_spelling_question(tmp_path: Path) -> None:
    comp, raw, public, private = prepared("google-quest", tmp_path, seed=1)  # no spelling rating held out
    classes = comp.metadata.target_columns
    labelled = read_csv(raw / "train.csv")
    expected_train, expected_test = train_test_split(labelled, test_size=0.1, random_state=0)
    spelling = "question_type_spelling"
    assert len(classes) == 30 and expected_test[spelling].nunique() == 1
    donor = expected_train[expected_train[spelling] != 0].iloc[0]
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["qa_id", *classes]
    assert answers["qa_id"].tolist() == [donor["qa_id"], *expected_test["qa_id"].iloc[1:]]
    train = pd.read_csv(public / "train.csv")
    position = expected_train.index.get_loc(donor.name)
    assert train["qa_id"].iloc[position] == expected_test["qa_id"].iloc[0]  # the held-out row took its place
    assert train.shape[1] == 41 and pd.read_csv(public / "test.csv").shape[1] == 11
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample[classes[0]].tolist() == pytest.approx(np.linspace(0, 1, len(answers)).tolist())
    assert (sample[classes].nunique() == len(answers)).all()


def test_quest_spearman_by_hand_and_validity() -> None:
    comp = get_competition("google-quest")
    classes = comp.metadata.target_columns
    truth = np.tile([[0.0], [0.5], [1.0]], (1, 30))
    answers = pd.concat([pd.DataFrame({"qa_id": [4, 5, 6]}), pd.DataFrame(truth, columns=classes)], axis=1)
    sub = answers.copy()
    # first column predicted 3, 1, 2: ranks (3, 1, 2) against (1, 2, 3), d^2 = 4 + 1 + 1,
    # rho = 1 - 6 * 6 / (3 * 8) = -0.5; the other 29 columns are perfect: (29 - 0.5) / 30 = 0.95
    sub[classes[0]] = [3.0, 1.0, 2.0]
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx(0.95)
    sub[classes[1]] = [np.inf, 1.0, 2.0]  # ranks only: infinity is the largest value, still valid
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx((28 - 1.0) / 30)
    for bad, message in ((sub.assign(extra=1), "extra column"), (sub.assign(**{classes[2]: 0.5}), "vary"),
                         (sub.assign(**{classes[2]: [0.1, np.nan, 0.2]}), "expected a number"),
                         (sub.assign(qa_id=[4, 5, 5]), "duplicate")):
        with pytest.raises(InvalidSubmissionError, match=message):
            comp.validate(bad, answers)


# -- jigsaw-unintended-bias-in-toxicity-classification -------------------------------------------
@_packaged("jigsaw-bias")
def test_jigsaw_bias_copies_kaggles_private_test_set_as_the_answers(tmp_path: Path) -> None:
    comp, raw, public, private = prepared("jigsaw-bias", tmp_path)
    assert (private / "test.csv").read_bytes() == (raw / "test_private_expanded.csv").read_bytes()
    assert (public / "train.csv").read_bytes() == (raw / "train.csv").read_bytes()
    answers = pd.read_csv(private / "test.csv")
    assert answers.shape[1] == 45 and len(comp.module.TRAIN_COLUMNS) == 45
    test = pd.read_csv(public / "test.csv")
    assert list(test.columns) == ["id", "comment_text"] and test["id"].tolist() == answers["id"].tolist()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["id", "prediction"] and set(sample["prediction"]) == {0.0}
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test.csv", "train.csv"]


def test_power_mean_by_hand() -> None:
    # ((0.5^-5 + 1^-5) / 2) ^ (-1/5) = (33 / 2) ^ -0.2 = 0.57083
    assert text_metrics.power_mean([0.5, 1.0], -5) == pytest.approx(16.5**-0.2)
    assert text_metrics.power_mean([0.0, 1.0], -5) == 0.0  # numpy's 0 ** -5 is infinity, so the mean is 0


def test_unintended_bias_score_by_hand() -> None:
    # 4 comments, toxic 1 0 1 0, identity membership 1 1 0 0, 0/1 predictions 1 1 1 0.
    # overall AUC over the pairs (toxic, non-toxic): (0, 1) tie 0.5, (0, 3) 1, (2, 1) tie 0.5, (2, 3) 1 -> 0.75.
    # subgroup rows {0, 1}: tie -> 0.5; BPSN rows {1, 2}: tie -> 0.5; BNSP rows {0, 3}: 1.
    # one identity: each power mean is that AUC. Score = 0.25 * (0.75 + 0.5 + 0.5 + 1) = 0.6875
    score = text_metrics.unintended_bias_score(np.array([1, 0, 1, 0]), np.array([1, 1, 1, 0]),
                                               np.array([[1], [1], [0], [0]]))
    assert score == pytest.approx(0.6875)


@_packaged("jigsaw-bias")
def test_jigsaw_bias_validity_follows_mle_bench() -> None:
    comp = get_competition("jigsaw-bias")
    identity = {name: [1.0, 1.0, 0.0, np.nan] for name in text_metrics.JIGSAW_IDENTITIES}
    answers = pd.DataFrame({"id": [10, 11, 12, 13], "toxicity": [0.8, 0.1, 0.6, 0.0], **identity})
    sub = pd.DataFrame({"id": [13, 12, 11, 10], "prediction": [-np.inf, 0.5, 0.7, 0.9]})
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx(0.6875)  # the case above, 9 times over
    # the answers' own column is accepted in place of `prediction`, scoring 1
    assert comp.score(comp.validate(answers[["id", "toxicity"]], answers), answers) == pytest.approx(1.0)
    # a blank counts as below 0.5, as -inf does
    assert comp.score(comp.validate(sub.assign(prediction=[np.nan, 0.5, 0.7, 0.9]), answers), answers) == \
        pytest.approx(0.6875)
    for bad, message in ((sub.assign(toxicity=0.1), "found both"), (sub.drop(columns="prediction"), "missing column"),
                         (sub.assign(prediction=["a", "b", "c", "d"]), "read as text"),
                         (sub.assign(prediction=np.nan), "every prediction is blank")):
        with pytest.raises(InvalidSubmissionError, match=message):
            comp.validate(bad, answers)


# -- chaii-hindi-and-tamil-question-answering ----------------------------------------------------
def test_chaii_holds_out_a_tenth_and_keeps_only_the_answer_text(tmp_path: Path) -> None:
    _, raw, public, private = prepared("chaii", tmp_path)
    expected_train, expected_test = _held_out(raw)
    answers = pd.read_csv(private / "test.csv")
    assert list(answers.columns) == ["id", "PredictionString"]
    assert answers["id"].tolist() == expected_test["id"].tolist()
    assert answers["PredictionString"].astype(str).tolist() == expected_test["answer_text"].astype(str).tolist()
    assert pd.read_csv(public / "train.csv")["id"].tolist() == expected_train["id"].tolist()
    assert list(pd.read_csv(public / "test.csv").columns) == ["id", "context", "question", "language"]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert set(sample["PredictionString"]) == {"dummy text"} and sample["id"].tolist() == answers["id"].tolist()
    train = pd.read_csv(public / "train.csv")
    starts = [context[start:start + len(answer)] for context, start, answer in
              zip(train["context"], train["answer_start"], train["answer_text"].astype(str))]
    assert starts == train["answer_text"].astype(str).tolist()  # each answer is the span at answer_start


def test_sample_jaccard_by_hand() -> None:
    # {x, y} vs {x}: 1/2; both empty: 0 (scikit-learn's zero_division); {दिल्ली} vs {दिल्ली}: 1 -> 1.5 / 3
    assert text_metrics.mean_sample_jaccard(["X", "", "दिल्ली"], ["x y", "", "दिल्ली"]) == pytest.approx(0.5)


def test_chaii_validity_follows_mle_bench() -> None:
    comp = get_competition("chaii")
    answers = pd.DataFrame({"id": ["a1", "b2", "c3"], "PredictionString": ["1947", "दिल्ली शहर", "சென்னை"]})
    sub = pd.DataFrame({"id": ["c3", "b2", "a1"], "PredictionString": ["சென்னை", "दिल्ली", np.nan]})
    # c3 exact: 1; b2: 1 of 2 words: 0.5; a1 blank: 0 -> 1.5 / 3
    assert comp.score(comp.validate(sub, answers), answers) == pytest.approx(0.5)
    with pytest.raises(InvalidSubmissionError, match="read as numbers"):
        comp.validate(sub.assign(PredictionString=[1947, 1950, np.nan]), answers)
    with pytest.raises(InvalidSubmissionError, match="every prediction is blank"):
        comp.validate(sub.assign(PredictionString=np.nan), answers)


# -- the sample data can be learnt ------------------------------------------------------------------
def test_us_patent_sample_pairs_can_be_learnt_from_the_training_pairs(tmp_path: Path) -> None:
    from mle_gym.competitions.datasets import ensure_sample_data

    comp = get_competition("us-patent")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")

    def key(frame: pd.DataFrame) -> pd.Series:  # the anchor's head word, the target, whether the modifier is shared
        same = frame["anchor"].str.split().str[0] == frame["target"].str.split().str[0]
        return frame["anchor"].str.split().str[-1] + "|" + frame["target"] + "|" + same.astype(str)

    table = train.groupby(key(train))["score"].mean()
    guess = pd.DataFrame({"id": test["id"], "score": key(test).map(table).fillna(train["score"].mean())})
    assert _grade(comp, guess, data.private, tmp_path).score > 0.7


@_packaged("tweet-sentiment")
def test_tweet_sentiment_words_beat_the_blank_sample(tmp_path: Path) -> None:
    from mle_gym.competitions.datasets import ensure_sample_data

    comp = get_competition("tweet-sentiment")
    data = ensure_sample_data(comp, seed=0)
    train, test = pd.read_csv(data.public / "train.csv"), pd.read_csv(data.public / "test.csv")
    charged = train[train["sentiment"] != "neutral"]
    vocabulary = {w.strip("!") for text in charged["selected_text"] for w in text.split()}
    picked = [text if mood == "neutral" else " ".join(w for w in text.split() if w.strip("!") in vocabulary)
              for text, mood in zip(test["text"], test["sentiment"])]
    report = _grade(comp, pd.DataFrame({"textID": test["textID"], "selected_text": picked}), data.private, tmp_path)
    assert report.score > 0.6
    assert _grade(comp, pd.read_csv(data.public / "sample_submission.csv"), data.private, tmp_path).score == 0.0


# -- hand-made files graded as MLE-bench grades them ---------------------------------------------
# Each case: competition, name, answers, submission, MLE-bench's outcome (its score rounded to 5 places,
# None for invalid, NaN for its NaN score) and, where we differ on purpose (docs/fidelity.md), our outcome and a
# fragment of our reason. MLE-bench's outcomes come from running its grader at its pinned versions.
QUEST_CLASSES = get_competition("google-quest").metadata.target_columns
JIGSAW_SCORED = text_metrics.JIGSAW_IDENTITIES


def _lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


def _quest(ids: tuple[int, ...] = (5, 6, 7, 8), first: list[object] | None = None, constant: bool = False,
           answers: bool = False) -> str:
    rows = ["qa_id," + ",".join(QUEST_CLASSES)]
    for k, qa_id in enumerate(ids):
        if answers:
            values = [str(round(((k * 7 + j * 3) % 4) / 3, 6)) for j in range(30)]
        else:
            values = [str(round(((k * 5 + j) % 4) / 4 + 0.01 * j, 4)) for j in range(30)]
        if first is not None:
            values[0] = str(first[k])
        if constant:
            values[1] = "0.5"
        rows.append(f"{qa_id}," + ",".join(values))
    return _lines(*rows)


_PATENT = _lines("id,anchor,target,context,score", "a1,bolt,screw,F16,0.75", "b2,bolt,gear,F16,0.0",
                 "c3,lens,optic,G02,1.0", "d4,pipe,tube,F16,0.5")
_TWEET = _lines("textID,text,selected_text,sentiment", "t1,so happy today,so happy,positive",
                "t2,meh ok,meh ok,neutral", "t3,,,neutral", "t4,i hate rain,hate,negative")
_ESSAY = _lines("essay_id,full_text,score", "e1,a,1", "e2,b,2", "e3,c,3", "e4,d,4")
_ARENA = _lines("id,winner_model_a,winner_model_b,winner_tie", "11,1,0,0", "12,0,1,0", "13,0,0,1")
_JIGSAW = _lines("id,comment_text,toxicity," + ",".join(JIGSAW_SCORED), *(
    f"{70 + i},text {i},{tox}," + ",".join(("1.0" if member else "") for _ in JIGSAW_SCORED)
    for i, (tox, member) in enumerate(zip([0.8, 0.1, 0.6, 0.0, 0.9, 0.2], [1, 1, 0, 0, 1, 0]))))
_CHAII = _lines("id,PredictionString", "q1,1947", "q2,दिल्ली शहर", "q3,சென்னை")
NAN = float("nan")
FIDELITY = [
    ("us-patent", "shuffled-rows", _PATENT, _lines("id,score", "c3,0.9", "a1,0.7", "d4,0.4", "b2,0.1"), 0.98984, None),
    ("us-patent", "constant-prediction", _PATENT, _lines("id,score", "a1,0", "b2,0", "c3,0", "d4,0"), NAN, (0.0, "")),
    ("us-patent", "blank-score", _PATENT, _lines("id,score", "a1,0.7", "b2,", "c3,0.9", "d4,0.4"), NAN,
     (None, "expected a number")),
    ("us-patent", "extra-column", _PATENT, _lines("id,score,note", "a1,0.7,x", "b2,0.1,y", "c3,0.9,z", "d4,0.4,w"),
     0.98984, None),
    ("tweet-sentiment", "blank-and-number", _TWEET,
     _lines("textID,selected_text", "t1,Happy", "t2,", "t3,1.5", "t4,hate"), 0.375, None),
    ("tweet-sentiment", "both-blank", _TWEET, _lines("textID,selected_text", "t1,happy", "t2,meh", "t3,", "t4,hate"),
     None, (None, "0/0")),
    ("tweet-sentiment", "unknown-id", _TWEET, _lines("textID,selected_text", "t1,happy", "t2,meh", "t3,x", "t9,hate"),
     None, (None, "not test ids")),
    ("essay-scoring", "whole-floats", _ESSAY, _lines("essay_id,score", "e4,4.0", "e1,1.0", "e2,3.0", "e3,3.0"), 0.9,
     None),
    ("essay-scoring", "fraction", _ESSAY, _lines("essay_id,score", "e1,1", "e2,2.5", "e3,3", "e4,4"), None,
     (None, "integer classes")),
    ("chatbot-arena", "rounds-to-one", _ARENA, _lines("id,winner_model_a,winner_model_b,winner_tie",
     "11,0.5000004,0.25,0.25", "12,0.2,0.7,0.1", "13.0,0.3,0.3,0.4"), 0.65537, None),
    ("chatbot-arena", "rounds-off-one", _ARENA, _lines("id,winner_model_a,winner_model_b,winner_tie",
     "11,0.5000006,0.25,0.25", "12,0.2,0.7,0.1", "13,0.3,0.3,0.4"), None, (None, "rounded to 6 decimals")),
    ("chatbot-arena", "exact-zero", _ARENA, _lines("id,winner_model_a,winner_model_b,winner_tie",
     "11,0,1,0", "12,0.2,0.7,0.1", "13,0.3,0.3,0.4"), 12.43887, None),
    ("google-quest", "shuffled-with-infinity", _quest(answers=True), _quest((8, 6, 5, 7), ["inf", 0.2, 0.3, "-inf"]),
     0.38, None),
    ("google-quest", "unknown-id", _quest(answers=True), _quest((5, 6, 7, 9)), 0.2, (None, "not test ids")),
    ("google-quest", "text-cell", _quest(answers=True), _quest(first=["0.1", "high", "0.3", "0.2"]), 0.22667,
     (None, "expected a number")),
    ("google-quest", "constant-column", _quest(answers=True), _quest(constant=True), NAN, (None, "vary")),
    ("jigsaw-bias", "blank-and-infinity", _JIGSAW, _lines("id,prediction", "75,0.1", "70,0.9", "71,", "72,inf",
     "73,-inf", "74,0.7"), 1.0, None),
    ("jigsaw-bias", "answers-column-name", _JIGSAW, _lines("id,toxicity", "70,0.8", "71,0.1", "72,0.6", "73,0.0",
     "74,0.9", "75,0.2"), 1.0, None),
    ("jigsaw-bias", "both-column-names", _JIGSAW,
     _lines("id,prediction,toxicity", *(f"{i},0.5,1" for i in range(70, 76))), None, (None, "found both")),
    ("jigsaw-bias", "all-blank", _JIGSAW, _lines("id,prediction", *(f"{i}," for i in range(70, 76))), 0.5,
     (None, "every prediction is blank")),
    ("chaii", "blank-and-partial", _CHAII, _lines("id,PredictionString", "q3,சென்னை", "q2,दिल्ली", "q1,"), 0.5, None),
    ("chaii", "numbers-only", _CHAII, _lines("id,PredictionString", "q1,1947", "q2,1950", "q3,1999"), None,
     (None, "read as numbers")),
    ("chaii", "all-blank", _CHAII, _lines("id,PredictionString", "q1,", "q2,", "q3,"), 0.0,
     (None, "every prediction is blank")),
]


@pytest.mark.parametrize("name,case,answers,submission,mlebench,ours",
                         [pytest.param(*c, marks=_packaged(c[0]), id=f"{c[0]}-{c[1]}") for c in FIDELITY])
def test_hand_made_files_grade_as_mle_bench_grades_them(name: str, case: str, answers: str, submission: str,
                                                         mlebench: float | None, ours: tuple[float | None, str] | None,
                                                         tmp_path: Path) -> None:
    comp = get_competition(name)
    private = tmp_path / "private"
    private.mkdir()
    (private / comp.metadata.answers_file).write_text(answers, encoding="utf-8")
    report = _grade(comp, submission, private, tmp_path)
    expected, fragment = ours if ours is not None else (mlebench, "")
    if expected is None:
        assert not report.valid_submission, report.score
        assert fragment in (report.reason or ""), report.reason
    else:
        assert report.valid_submission, report.reason
        assert report.score == expected
