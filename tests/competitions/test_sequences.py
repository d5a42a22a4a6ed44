"""Sequence competitions: Facebook keywords, Billion Word, AI4Code, TensorFlow 2 QA, gestures.

Each `prepare` is pinned to the facts of MLE-bench's preparation code (fractions, seeds, file
names, columns, row order), each metric to values worked out by hand on tiny cases, and the
validity rules to the verdicts of MLE-bench's graders (checked against them differentially on
synthetic downloads, see the competitions' notes).
"""

from __future__ import annotations

import json
import random
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from mle_gym.competitions import Competition, get_competition
from mle_gym.grading import sequence_metrics as sm
from mle_gym.grading.sequence_metrics import (
    binary_micro_f1,
    count_inversions,
    gesture_error_rate,
    kendall_tau,
    levenshtein,
    mean_levenshtein,
    micro_f1_label_sets,
)
from synthetic import grade_file, prepared


_prepared = prepared


def _grade(comp: Competition, frame: pd.DataFrame | str, private: Path, tmp_path: Path):
    return grade_file(comp, private, frame, tmp_path)


# -- metrics, by hand --------------------------------------------------------------------------------------
@pytest.fixture(params=["bit-parallel", "compiled-if-present"])
def edit_distance(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if request.param == "bit-parallel":
        monkeypatch.setattr(sm, "_compiled_distance", None)
    return levenshtein


def test_levenshtein_by_hand(edit_distance) -> None:
    assert edit_distance("kitten", "sitting") == 3  # k->s, e->i, +g
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "") == 3
    assert edit_distance("café", "cafe") == 1  # one code point, not two UTF-8 bytes
    assert edit_distance("flaw", "lawn") == 2  # -f, +n
    assert edit_distance("The cat sat .", "The sat .") == 4  # "cat " removed
    assert edit_distance([1, 2, 3], [1, 3]) == 1  # lists compare item by item
    assert edit_distance([11, 2], [1, 12]) == 2  # 11 and 1 are different gestures
    assert edit_distance("a" * 70 + "b" * 70, "b" * 70 + "a" * 70) == 140  # longer than one machine word


def test_bit_parallel_agrees_with_the_textbook_table() -> None:
    def table(a: str, b: str) -> int:
        row = list(range(len(b) + 1))
        for i, x in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, y in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
        return row[-1]

    rng = random.Random(0)
    for _ in range(300):
        a = "".join(rng.choice("ab c") for _ in range(rng.randint(0, 90)))
        b = "".join(rng.choice("ab c") for _ in range(rng.randint(0, 90)))
        assert sm._bit_parallel(a, b) == table(a, b), (a, b)


def test_batched_distances_agree_with_the_pair_by_pair_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sm, "_compiled_distance", None)
    rng = random.Random(1)
    alphabet = list("ab c,\"é") + ["\U0001F600"]  # a character outside the BMP too
    truth = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200))) for _ in range(300)]
    predicted = [t[: len(t) // 2] + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 150))) for t in truth]
    predicted[:3] = truth[:3]  # equal pairs are skipped
    truth += ["a" * 64, "a" * 128 + "z"]  # patterns of exactly one and of three words
    predicted += ["b" * 64 + "a", "z" + "a" * 130]
    expected = [sm._bit_parallel(*sorted((t, p), key=len)) for t, p in zip(truth, predicted)]
    assert sm.levenshtein_distances(truth, predicted).tolist() == expected
    assert expected[-2:] == [64, 3]


def test_mean_levenshtein_and_gesture_error_rate_by_hand() -> None:
    assert mean_levenshtein(["ab", "abc"], ["ab", "xbcd"]) == pytest.approx((0 + 2) / 2)
    # distances 1 (3 deleted) and 1 (5 inserted) over 4 true gestures
    assert gesture_error_rate([[1, 2, 3], [4]], [[1, 2], [4, 5]]) == pytest.approx(0.5)
    assert gesture_error_rate([[1, 2]], [list(range(1, 21))]) == pytest.approx(18 / 2)  # above 1


def test_kendall_tau_by_hand() -> None:
    assert kendall_tau([["a", "b", "c"]], [["a", "b", "c"]]) == 1.0
    assert kendall_tau([["a", "b", "c"]], [["c", "b", "a"]]) == -1.0  # 3 inversions of 3 pairs: 1 - 4*3/6
    # one swapped pair out of 6 (n=4) and a perfect n=2: 1 - 4*1/(12 + 2)
    one_swap = kendall_tau([["a", "b", "c", "d"], ["x", "y"]], [["a", "c", "b", "d"], ["x", "y"]])
    assert one_swap == pytest.approx(1 - 4 / 14)
    assert count_inversions(np.arange(3000)[::-1]) == 3000 * 2999 // 2  # the large-notebook path
    perm = np.random.default_rng(0).permutation(2500)
    brute = int(sum((perm[i] > perm[i + 1:]).sum() for i in range(len(perm))))
    assert count_inversions(perm) == brute


def test_micro_f1_of_label_sets_by_hand() -> None:
    # classes {a, b, c} from the answers; "x" is ignored, the repeated "c" counts once.
    # true pairs: (0,a) (0,b) (1,c) = 3; predicted known pairs: (0,a) (1,c) (1,b) = 3; TP = 2
    assert micro_f1_label_sets([["a", "b"], ["c"]], [["a", "x"], ["c", "c", "b"]]) == pytest.approx(2 * 2 / 6)
    assert micro_f1_label_sets([["a"], []], [[], []]) == 0.0
    assert micro_f1_label_sets([["a"]], [["z"]]) == 0.0


def test_binary_micro_f1_is_the_share_of_agreeing_rows() -> None:
    assert binary_micro_f1(np.array([1, 0, 1, 0]), np.array([1, 0, 0, 1])) == 0.5
    assert binary_micro_f1(np.array([0, 0]), np.array([0, 0])) == 1.0


# -- Facebook Recruiting III ---------------------------------------------------------------------------------
FB = "facebook-recruiting-iii-keyword-extraction"


def test_facebook_holds_out_ten_percent_seed_zero_with_mle_benchs_sample(tmp_path: Path) -> None:
    _, raw, public, private = _prepared(FB, tmp_path)
    with zipfile.ZipFile(raw / "Train.zip") as zf:
        old = pd.read_csv(zf.open("Train.csv"), dtype={"Id": str, "Tags": str})
    expected_train, expected_test = train_test_split(old, test_size=0.1, random_state=0)
    assert len(expected_test) == 20
    assert sorted(p.name for p in public.iterdir()) == ["sample_submission.csv", "test.csv", "train.csv"]
    assert pd.read_csv(public / "train.csv", dtype=str)["Id"].tolist() == expected_train["Id"].tolist()
    answers = pd.read_csv(private / "test.csv", dtype=str)
    assert list(answers.columns) == ["Id", "Title", "Body", "Tags"]
    assert answers["Id"].tolist() == expected_test["Id"].tolist()
    assert list(pd.read_csv(public / "test.csv").columns) == ["Id", "Title", "Body"]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert list(sample.columns) == ["Id", "Title", "Body", "Tags"]  # MLE-bench keeps the question text
    assert set(sample["Tags"]) == {"javascript c# python php java"}


def test_facebook_validity_follows_mle_bench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared(FB, tmp_path)
    answers = pd.read_csv(private / "test.csv")[["Id", "Tags"]]
    assert _grade(comp, answers.sample(frac=1, random_state=0), private, tmp_path).score == 1.0
    blank = _grade(comp, answers.assign(Tags=np.nan), private, tmp_path)  # fillna(""): no tags, score 0
    assert blank.valid_submission and blank.score == 0.0
    numbers = _grade(comp, answers.assign(Tags=7), private, tmp_path)  # .str fails on a numeric column
    assert not numbers.valid_submission and "expected space-separated tags as text" in numbers.reason
    float_ids = _grade(comp, answers.assign(Id=answers["Id"].astype(float)), private, tmp_path)
    assert float_ids.score == 1.0  # 7.0 equals 7 in MLE-bench's comparison
    assert not _grade(comp, answers.iloc[1:], private, tmp_path).valid_submission


def test_facebook_ignores_unknown_tags_and_repeats(tmp_path: Path) -> None:
    comp, _, _, private = _prepared(FB, tmp_path)
    answers = pd.read_csv(private / "test.csv")[["Id", "Tags"]]
    padded = answers.assign(Tags=answers["Tags"] + " " + answers["Tags"] + " no-such-tag-anywhere")
    assert _grade(comp, padded, private, tmp_path).score == 1.0


# -- Billion Word Imputation ---------------------------------------------------------------------------------
BW = "billion-word-imputation"


def _reference_split(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """MLE-bench's loop written plainly: one uniform per line, then a randint for each test sentence."""
    rng = np.random.RandomState(0)
    train, answers, masked = [], [], []
    for line in lines:
        if rng.uniform() <= 0.01 and len(line.strip().split()) > 2:
            text = line.strip().replace('"', '""')
            words = text.split()
            index = rng.randint(1, len(words) - 1)
            answers.append(f'{len(answers)},"{text}"\n')
            masked.append(f'{len(masked)},"{" ".join(words[:index] + words[index + 1:])}"\n')
        else:
            train.append(line)
    return train, answers, masked


def test_billion_word_reproduces_mle_benchs_stream_of_draws(tmp_path: Path) -> None:
    _, raw, public, private = _prepared(BW, tmp_path, n=12000)  # several blocks of draws
    with zipfile.ZipFile(raw / "train_v2.txt.zip") as zf:
        lines = zf.read("train_v2.txt").decode().splitlines(keepends=True)
    train, answers, masked = _reference_split(lines)
    assert len(answers) > 100
    assert sorted(p.name for p in public.iterdir()) == ["test_v2.txt.zip", "train_v2.txt.zip"]
    assert sorted(p.name for p in private.iterdir()) == ["sample_submission.csv", "test.csv"]
    header = '"id","sentence"\n'
    assert (private / "test.csv").read_text() == header + "".join(answers)
    assert (private / "sample_submission.csv").read_text() == header + "".join(masked)
    with zipfile.ZipFile(public / "train_v2.txt.zip") as zf:
        assert zf.namelist() == ["train_v2.txt"] and zf.read("train_v2.txt").decode() == "".join(train)
    with zipfile.ZipFile(public / "test_v2.txt.zip") as zf:
        assert zf.namelist() == ["test_v2.txt"] and zf.read("test_v2.txt").decode() == header + "".join(masked)


def test_billion_word_stops_after_mle_benchs_line_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    comp = get_competition(BW)
    monkeypatch.setattr(comp.module, "TOTAL_LINES", 500)
    _, raw, public, _ = _prepared(BW, tmp_path, n=2000)
    with zipfile.ZipFile(public / "train_v2.txt.zip") as zf:
        kept = zf.read("train_v2.txt").decode().count("\n")
    test_rows = len(pd.read_csv(tmp_path / "private" / "test.csv"))
    assert kept + test_rows == 500


def test_billion_word_validity_follows_mle_bench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared(BW, tmp_path)
    answers = pd.read_csv(private / "test.csv")
    masked = pd.read_csv(private / "sample_submission.csv")
    perfect = _grade(comp, answers.sample(frac=1, random_state=0), private, tmp_path)
    assert perfect.score == 0.0
    unchanged = _grade(comp, masked, private, tmp_path)
    lengths = [len(a) - len(m) for a, m in zip(answers["sentence"], masked["sentence"])]  # the token and a space
    assert unchanged.score == pytest.approx(np.mean(lengths), abs=1e-5)
    blank = _grade(comp, answers.assign(sentence=[None] + answers["sentence"].tolist()[1:]), private, tmp_path)
    assert not blank.valid_submission and "expected a sentence (text) in every row" in blank.reason


# -- AI4Code ------------------------------------------------------------------------------------------------
AI = "AI4Code"


def test_ai4code_test_size_is_mle_benchs_twenty_thousand_on_the_real_download() -> None:
    module = get_competition(AI).module
    assert module.test_size(139_256) == 20_000
    assert module.test_size(100) == 14  # a synthetic download keeps the same share


def test_ai4code_greedy_split_keeps_ancestor_groups_whole() -> None:
    split = get_competition(AI).module.split_by_ancestor
    # groups in order of first appearance: A={1,3} (2), B={2} (1), C={4,5,6} (3), D={7} (1)
    ids = ["1", "2", "3", "4", "5", "6", "7"]
    ancestors = ["A", "B", "A", "C", "C", "C", "D"]
    train, test = split(ids, ancestors, 4)  # A fits (2), B fits (3), C does not (6 > 4), D fits (4)
    assert test == ["1", "3", "2", "7"] and train == ["4", "5", "6"]
    with pytest.raises(ValueError, match="fill only 4 of 5"):
        split(ids, ancestors, 5)  # A, B -> 3; C would make 6; D -> 4; nothing is left to reach 5
    # a dict, as MLE-bench's: two missing ancestors are two groups unless they are the same object
    train, test = split(["1", "2"], [float("nan"), float("nan")], 1)
    assert test == ["1"] and train == ["2"]


def test_ai4code_split_files_and_sample_order(tmp_path: Path) -> None:
    _, raw, public, private = _prepared(AI, tmp_path)
    ancestors = pd.read_csv(raw / "train_ancestors.csv").sample(frac=1, random_state=0).reset_index(drop=True)
    answers = pd.read_csv(private / "test_orders.csv")
    assert len(answers) == 14 and list(answers.columns) == ["id", "cell_order"]
    test_ids = set(answers["id"])
    assert sorted(p.stem for p in (public / "test").iterdir()) == sorted(test_ids)
    kept = pd.read_csv(public / "train_ancestors.csv")
    assert kept["id"].tolist() == [i for i in ancestors["id"] if i not in test_ids]  # shuffled order kept
    assert not set(kept["ancestor_id"]) & set(ancestors.loc[ancestors["id"].isin(test_ids), "ancestor_id"])
    orders = pd.read_csv(raw / "train_orders.csv")
    assert answers["id"].tolist() == [i for i in orders["id"] if i in test_ids]  # train_orders.csv's order
    sample = pd.read_csv(public / "sample_submission.csv")
    first = sample["id"].iloc[0]
    listed = list(json.loads((public / "test" / f"{first}.json").read_text())["cell_type"])
    assert sample["cell_order"].iloc[0] == " ".join(listed)
    assert sorted(p.name for p in public.iterdir()) == [
        "sample_submission.csv", "test", "train", "train_ancestors.csv", "train_orders.csv"]


def test_ai4code_validity_follows_mle_bench(tmp_path: Path) -> None:
    comp, _, _, private = _prepared(AI, tmp_path)
    answers = pd.read_csv(private / "test_orders.csv")
    assert _grade(comp, answers.sample(frac=1, random_state=0), private, tmp_path).score == 1.0
    reverse = answers.assign(cell_order=[" ".join(o.split()[::-1]) for o in answers["cell_order"]])
    assert _grade(comp, reverse, private, tmp_path).score == -1.0
    orders = answers["cell_order"].tolist()
    short = answers.assign(cell_order=[" ".join(orders[0].split()[:-1])] + orders[1:])
    assert "expected an order of its" in _grade(comp, short, private, tmp_path).reason
    doubled = answers.assign(cell_order=[" ".join(orders[0].split()[:-1] + orders[0].split()[:1])] + orders[1:])
    assert "of them are missing" in _grade(comp, doubled, private, tmp_path).reason


# -- TensorFlow 2.0 Question Answering -----------------------------------------------------------------------
QA = "tensorflow2-question-answering"


def test_tf2qa_holds_out_ten_percent_of_each_thousand_line_chunk(tmp_path: Path) -> None:
    _, raw, public, private = _prepared(QA, tmp_path, n=2500)
    lines = (raw / "simplified-nq-train.jsonl").read_text().splitlines()
    expected_test = []
    for start in range(0, len(lines), 1000):
        chunk = list(range(start, min(start + 1000, len(lines))))
        expected_test += train_test_split(chunk, test_size=0.1, random_state=0)[1]
    assert len(expected_test) == 100 + 100 + 50
    ids = [str(json.loads(lines[i])["example_id"]) for i in expected_test]
    test = [json.loads(line) for line in (private / "test.jsonl").read_text().splitlines()]
    assert [r["example_id"] for r in test] == ids  # ids written as strings
    public_test = [json.loads(line) for line in (public / "simplified-nq-test.jsonl").read_text().splitlines()]
    assert list(public_test[0]) == ["example_id", "question_text", "document_text", "long_answer_candidates"]
    gold = pd.read_csv(private / "gold_submission.csv")
    assert gold["example_id"].tolist()[:2] == [f"{ids[0]}_short", f"{ids[0]}_long"]
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample["example_id"].tolist() == gold["example_id"].tolist() and sample["PredictionString"].isna().all()
    assert sorted(p.name for p in public.iterdir()) == [
        "sample_submission.csv", "simplified-nq-test.jsonl", "simplified-nq-train.jsonl"]
    assert sorted(p.name for p in private.iterdir()) == ["answers.csv.gz", "gold_submission.csv", "test.jsonl"]


def test_tf2qa_gold_answer_rule(tmp_path: Path) -> None:
    rows = get_competition(QA).module._answer_rows
    annotation = {"yes_no_answer": "NONE", "long_answer": {"start_token": 5, "end_token": 30},
                  "short_answers": [{"start_token": 7, "end_token": 9}, {"start_token": 12, "end_token": 13}]}
    short, long = rows("42", annotation)
    assert short == {"example_id": "42_short", "PredictionString": "7:9", "valid_answers": "7:9 12:13"}
    assert long == {"example_id": "42_long", "PredictionString": "5:30", "valid_answers": "5:30"}
    yes = rows("1", {**annotation, "yes_no_answer": "YES"})[0]
    assert yes["PredictionString"] == "YES" and yes["valid_answers"] == "7:9 12:13 YES"
    nothing = {"yes_no_answer": "NONE", "long_answer": {"start_token": -1, "end_token": -1}, "short_answers": []}
    none = rows("2", nothing)
    assert [r["PredictionString"] for r in none] == ["", ""]


def test_tf2qa_scores_mle_benchs_way(tmp_path: Path) -> None:
    comp, _, public, private = _prepared(QA, tmp_path)
    answers = pd.read_csv(private / "answers.csv.gz")
    gold = pd.read_csv(private / "gold_submission.csv")
    assert _grade(comp, gold.sample(frac=1, random_state=0), private, tmp_path).score == 1.0
    last_valid = [v.split()[-1] if isinstance(v, str) else "" for v in answers["valid_answers"]]
    assert _grade(comp, gold.assign(PredictionString=last_valid), private, tmp_path).score == 1.0
    blank = _grade(comp, pd.read_csv(public / "sample_submission.csv"), private, tmp_path)
    assert blank.score == pytest.approx(answers["valid_answers"].isna().mean(), abs=1e-5)  # right where none exists
    padded = [f" 0{v.split(':')[0]}:{v.split(':')[1]} " if ":" in v else v for v in last_valid]
    assert _grade(comp, gold.assign(PredictionString=padded), private, tmp_path).score == 1.0  # int() reads them
    for bad, message in (("yes", "expected a token span"), ("1:2:3", "expected a token span"), ("a:b", "found 'a:b'")):
        report = _grade(comp, gold.assign(PredictionString=[bad] + gold["PredictionString"].tolist()[1:]), private,
                        tmp_path)
        assert not report.valid_submission and message in report.reason, bad
    assert not _grade(comp, gold.iloc[1:], private, tmp_path).valid_submission


# -- Multi-modal Gesture Recognition ------------------------------------------------------------------------
GS = "multi-modal-gesture-recognition"


def test_gestures_make_training4_the_test_set(tmp_path: Path) -> None:
    _, raw, public, private = _prepared(GS, tmp_path)
    with tarfile.open(raw / "training4.tar.gz") as tar:
        ids = sorted(name[-8:-4] for name in tar.getnames())
    training = pd.read_csv(raw / "training.csv", dtype=str)
    answers = pd.read_csv(private / "test.csv", dtype=str)
    assert answers["Id"].tolist() == ids == training.loc[training["Id"].isin(ids), "Id"].tolist()
    assert pd.read_csv(public / "training.csv", dtype=str)["Id"].tolist() == [i for i in training["Id"] if i not in ids]
    assert pd.read_csv(public / "test.csv", dtype=str)["Id"].tolist() == ids
    random.seed(0)
    expected = [" ".join(str(x) for x in random.sample(range(1, 21), 20)) for _ in ids]
    assert pd.read_csv(public / "randomPredictions.csv")["Sequence"].tolist() == expected
    assert (public / "test.tar.gz").read_bytes() == (raw / "training4.tar.gz").read_bytes()
    assert sorted(p.name for p in public.iterdir()) == sorted([
        "devel01-40.7z", "randomPredictions.csv", "sample_code_mmrgc.zip", "test.csv", "test.tar.gz", "training.csv",
        "training1.tar.gz", "training2.tar.gz", "training3.tar.gz", "valid_all_files_combined.7z",
        "validation1.tar.gz", "validation2.tar.gz", "validation3.tar.gz"])


def test_gestures_validity_follows_mle_bench(tmp_path: Path) -> None:
    comp, _, public, private = _prepared(GS, tmp_path)
    answers = pd.read_csv(private / "test.csv", dtype=str)
    assert _grade(comp, answers.assign(Id=answers["Id"].astype(int)), private, tmp_path).score == 0.0
    sequences = answers["Sequence"].tolist()
    dropped = answers.assign(Sequence=[" ".join(s.split()[1:]) for s in sequences])  # one deletion per row
    total = sum(len(s.split()) for s in sequences)
    assert _grade(comp, dropped, private, tmp_path).score == pytest.approx(len(sequences) / total, abs=1e-5)
    blank = _grade(comp, answers.assign(Sequence=[None] + sequences[1:]), private, tmp_path)
    assert not blank.valid_submission and "holds 'nan'" in blank.reason  # MLE-bench's str cast, then int()
    floats = _grade(comp, answers.assign(Sequence=[float(i + 1) for i in range(len(answers))]), private, tmp_path)
    assert not floats.valid_submission and "holds '1.0'" in floats.reason
