"""H&M Personalized Fashion Recommendations: MLE-bench's last-week split, MAP@12, and a synthetic shop.

MLE-bench's answers (`answers.csv`, kept byte for byte) list only the customers who bought
something in the held-out week, while the submission covers every customer. Our grader reads
`answers_all_customers.csv.gz` instead: every customer of the sample submission, in its order,
with their purchases (blank for none), so that validation can ask for every customer without
telling which of them bought anything. The gzip suffix keeps it out of MLE-bench's checksums.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import is_float_dtype

from mle_gym.competitions.helpers import read_csv
from mle_gym.grading.regression_metrics import map_at_k
from mle_gym.grading.validation import validate_standard

ID, TARGET = "customer_id", "prediction"
GRADING_ANSWERS = "answers_all_customers.csv.gz"
SAMPLE_RAW = {"n_customers": 400, "n_articles": 150, "n_days": 40}


def prepare(raw: Path, public: Path, private: Path) -> None:
    """The last 8 days of transactions (dates >= the last date minus 7 days) are the test week; no random split."""
    old_train = read_csv(raw / "transactions_train.csv")
    dates = pd.to_datetime(old_train["t_dat"])
    in_test = dates >= dates.max() - pd.Timedelta(days=7)
    new_train, new_test = old_train[~in_test], old_train[in_test]
    # article ids were read as numbers, so they are written without Kaggle's leading zero, as in MLE-bench
    answers = (new_test.groupby(ID)["article_id"].apply(lambda x: " ".join(x.astype(str))).reset_index()
               .rename(columns={"article_id": TARGET}))
    shutil.copyfile(raw / "sample_submission.csv", public / "sample_submission.csv")
    answers.to_csv(private / "answers.csv", index=False)
    new_train.to_csv(public / "transactions_train.csv", index=False)
    for name in ("articles.csv", "customers.csv"):
        shutil.copyfile(raw / name, public / name)
    shutil.copytree(raw / "images", public / "images", dirs_exist_ok=True)
    customers = read_csv(raw / "sample_submission.csv", usecols=[ID], dtype=str)
    every = customers.merge(answers, on=ID, how="left")
    every.to_csv(private / GRADING_ANSWERS, index=False, compression={"method": "gzip", "mtime": 0})


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Exactly `customer_id` and `prediction`; every customer of the sample submission once; any text as prediction.

    MLE-bench also scores files that leave out customers who bought nothing, or repeat or add
    customers; we ask for each customer once (docs/fidelity.md): which ones bought is private.
    """
    return validate_standard(submission, answers, id_column=ID, target_columns=[TARGET], numeric_targets=False,
                             extra_columns=False)


def as_text(column: pd.Series) -> list[str]:
    """Each cell as pandas 2's `astype(str)` gives it to MLE-bench's grader: a blank is 'nan', 7 is '7', 7.5 '7.5'."""
    return [str(v) for v in column.to_numpy(dtype=object)]


def _purchases(column: pd.Series) -> list[str | None]:
    """The answers' purchases as written (blank: none); a column of single ids pandas read as floats is turned back."""
    values = column.to_numpy(dtype=object)
    if is_float_dtype(column):
        return [None if v != v else str(int(v)) for v in values]
    return [None if isinstance(v, float) and v != v else str(v) for v in values]


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """MAP@12 over the customers who bought something in the test week; predictions split on single spaces."""
    truth = _purchases(answers[TARGET])
    rows = [i for i, t in enumerate(truth) if t is not None]
    predictions = as_text(aligned[TARGET].iloc[rows])
    return map_at_k([set(truth[i].split(" ")) for i in rows], [p.split(" ") for p in predictions], k=12)


def _hex_id(rng: np.random.Generator) -> str:
    return "".join(rng.choice(list("0123456789abcdef"), 64))


COLOURS = [(9, "Black", 5), (10, "White", 3), (73, "Dark Blue", 2), (43, "Dark Red", 18), (19, "Greenish Khaki", 20)]
PRODUCTS = [(253, "Vest top", "Garment Upper body"), (272, "Trousers", "Garment Lower body"),
            (265, "Dress", "Garment Full body"), (306, "Bra", "Underwear"), (252, "Sweater", "Garment Upper body")]


def make_raw(raw: Path, seed: int, n_customers: int = 60, n_articles: int = 30, n_days: int = 20,
             purchases_per_customer: float = 4.0) -> None:
    """Kaggle's download: transactions_train.csv, articles.csv, customers.csv, sample_submission.csv, images/."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    codes = np.sort(rng.choice(np.arange(108775, 959461), n_articles, replace=False))
    article_ids = [f"{c:07d}{int(rng.integers(1, 30)):03d}".zfill(10) for c in codes]
    product = rng.integers(0, len(PRODUCTS), n_articles)
    colour = rng.integers(0, len(COLOURS), n_articles)
    articles = pd.DataFrame({
        "article_id": article_ids, "product_code": [f"{c:07d}" for c in codes],
        "prod_name": [f"{PRODUCTS[p][1]} {k}" for k, p in enumerate(product)],
        "product_type_no": [PRODUCTS[p][0] for p in product], "product_type_name": [PRODUCTS[p][1] for p in product],
        "product_group_name": [PRODUCTS[p][2] for p in product], "graphical_appearance_no": 1010016,
        "graphical_appearance_name": "Solid", "colour_group_code": [COLOURS[c][0] for c in colour],
        "colour_group_name": [COLOURS[c][1] for c in colour], "perceived_colour_value_id": 4,
        "perceived_colour_value_name": "Dark", "perceived_colour_master_id": [COLOURS[c][2] for c in colour],
        "perceived_colour_master_name": [COLOURS[c][1].split()[-1] for c in colour], "department_no": 1676,
        "department_name": "Jersey Basic", "index_code": "A", "index_name": "Ladieswear", "index_group_no": 1,
        "index_group_name": "Ladieswear", "section_no": 16, "section_name": "Womens Everyday Basics",
        "garment_group_no": 1002, "garment_group_name": "Jersey Basic",
        "detail_desc": [f"A {COLOURS[c][1].lower()} {PRODUCTS[p][1].lower()} in soft cotton jersey."
                        for p, c in zip(product, colour)],
    })
    articles.to_csv(raw / "articles.csv", index=False)
    for k, article_id in enumerate(article_ids):
        if k % 5 == 4:  # Kaggle has no picture for some articles
            continue
        folder = raw / "images" / article_id[:3]
        folder.mkdir(parents=True, exist_ok=True)
        shade = np.array([40 + 40 * colour[k], 200 - 30 * colour[k], 90 + 25 * product[k]], dtype=np.uint8)
        Image.fromarray(np.tile(shade, (24, 16, 1))).save(folder / f"{article_id}.jpg", quality=85)
    customer_ids = sorted(_hex_id(rng) for _ in range(n_customers))
    pd.DataFrame({
        "customer_id": customer_ids, "FN": rng.choice([1.0, np.nan], n_customers),
        "Active": rng.choice([1.0, np.nan], n_customers),
        "club_member_status": rng.choice(["ACTIVE", "PRE-CREATE"], n_customers, p=[0.9, 0.1]),
        "fashion_news_frequency": rng.choice(["NONE", "Regularly"], n_customers),
        "age": rng.integers(16, 80, n_customers), "postal_code": [_hex_id(rng) for _ in range(n_customers)],
    }).to_csv(raw / "customers.csv", index=False)
    popularity = rng.dirichlet(np.full(n_articles, 0.5))
    taste = rng.integers(0, len(PRODUCTS), n_customers)
    n = int(n_customers * purchases_per_customer)
    buyer = rng.integers(0, n_customers, n)
    weights = popularity * (1 + 3 * (product[None, :] == taste[buyer][:, None]))
    bought = [int(rng.choice(n_articles, p=w / w.sum())) for w in weights]
    day = np.sort(rng.integers(0, n_days, n))
    prices = (rng.uniform(5, 60, n_articles) / 590).round(16)
    transactions = pd.DataFrame({
        "t_dat": (pd.Timestamp("2020-08-01") + pd.to_timedelta(day, unit="D")).strftime("%Y-%m-%d"),
        "customer_id": [customer_ids[b] for b in buyer], "article_id": [article_ids[a] for a in bought],
        "price": prices[bought], "sales_channel_id": rng.choice([1, 2], n, p=[0.3, 0.7]),
    })
    # one purchase of an article per customer: a repeat in the test week would keep the answers from scoring 1
    transactions.drop_duplicates(["customer_id", "article_id"]).to_csv(raw / "transactions_train.csv", index=False)
    top = " ".join(article_ids[i] for i in np.argsort(-popularity)[:12])
    pd.DataFrame({ID: customer_ids, TARGET: top}).to_csv(raw / "sample_submission.csv", index=False)
