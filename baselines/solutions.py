"""Training scripts the scripted agent writes into the sandbox, one pipeline per competition.

Each script runs as `python3 solution.py DATA_DIR SUBMISSION_PATH [SEED]` with numpy, pandas,
scikit-learn and pillow only (the sandbox image's stack); the CNN script also needs torch and
is used only when the sandbox can import it. Scripts print a validation score so that the
transcript reads like an agent's own work.
"""

from __future__ import annotations

from dataclasses import dataclass

_HEADER = '''\
import sys
from pathlib import Path

import numpy as np
import pandas as pd

DATA, OUT = Path(sys.argv[1]), Path(sys.argv[2])
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 0
OUT.parent.mkdir(parents=True, exist_ok=True)
'''

_CACTUS_LOAD = '''
import zipfile
from PIL import Image


def load_tiles(archive):
    """{file name: 32x32x3 float array in [0, 1]} for every image in a zip."""
    tiles = {}
    with zipfile.ZipFile(archive) as zf:
        for name in zf.namelist():
            if name.lower().endswith((".jpg", ".jpeg", ".png")):
                with zf.open(name) as fh:
                    img = Image.open(fh).convert("RGB").resize((32, 32))
                tiles[name.rsplit("/", 1)[-1]] = np.asarray(img, dtype=np.float32) / 255.0
    return tiles


train = pd.read_csv(DATA / "train.csv")
sample = pd.read_csv(DATA / "sample_submission.csv")
train_tiles = load_tiles(DATA / "train.zip")
test_tiles = load_tiles(DATA / "test.zip")
X_img = np.stack([train_tiles[i] for i in train["id"]])
T_img = np.stack([test_tiles[i] for i in sample["id"]])
y = train["has_cactus"].to_numpy()
print(f"{len(X_img)} training tiles, {len(T_img)} test tiles, {y.mean():.2f} cactus")
'''

CACTUS_SKLEARN = _HEADER + _CACTUS_LOAD + '''
from sklearn.ensemble import HistGradientBoostingClassifier


def features(imgs):
    """Per-channel statistics, green-minus-red column/row profiles and 8x8 downsampled pixels."""
    n = len(imgs)
    flat = imgs.reshape(n, -1, 3)
    stats = [flat.mean(1), flat.std(1)] + [np.percentile(flat, q, axis=1) for q in (5, 25, 50, 75, 95)]
    green = imgs[..., 1] - imgs[..., 0]
    cols, rows = green.mean(1), green.mean(2)
    shape = [cols.max(1), cols.min(1), cols.std(1), rows.max(1), rows.std(1), green.max((1, 2)),
             (green > 0.05).mean((1, 2)), np.abs(np.diff(imgs, axis=2)).mean((1, 2, 3))]
    small = imgs.reshape(n, 8, 4, 8, 4, 3).mean((2, 4)).reshape(n, -1)
    return np.hstack(stats + [np.stack(shape, 1), small])


X, T = features(X_img), features(T_img)
# Early stopping on a held-out 15% also reports the validation AUC.
model = HistGradientBoostingClassifier(max_iter=300, learning_rate=0.08, early_stopping=True, scoring="roc_auc",
                                       validation_fraction=0.15, n_iter_no_change=15, random_state=SEED)
model.fit(X, y)
print(f"{model.n_iter_} trees, validation auc {model.validation_score_[-1]:.4f}")
sample["has_cactus"] = model.predict_proba(T)[:, 1]
sample.to_csv(OUT, index=False)
print("wrote", OUT, sample.shape)
'''

CACTUS_CNN = _HEADER + _CACTUS_LOAD + '''
import torch
from torch import nn

torch.manual_seed(SEED)
device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Dropout(0.2), nn.Linear(128, 1),
).to(device)
X = torch.tensor(X_img).permute(0, 3, 1, 2)
T = torch.tensor(T_img).permute(0, 3, 1, 2)
Y = torch.tensor(y, dtype=torch.float32)
order = torch.randperm(len(X))
hold = order[: max(len(X) // 10, 1)]
fit = order[len(hold):]
opt = torch.optim.Adam(net.parameters(), lr=2e-3)
loss_fn = nn.BCEWithLogitsLoss()


def predict(images):
    net.eval()
    with torch.no_grad():
        return torch.cat([torch.sigmoid(net(images[i:i + 512].to(device))).squeeze(1).cpu()
                          for i in range(0, len(images), 512)])


for epoch in range(12):
    net.train()
    for idx in fit[torch.randperm(len(fit))].split(128):
        xb = X[idx]
        flip = torch.rand(len(xb)) < 0.5
        xb[flip] = xb[flip].flip(3)
        opt.zero_grad()
        loss = loss_fn(net(xb.to(device)).squeeze(1), Y[idx].to(device))
        loss.backward()
        opt.step()
    p, t = predict(X[hold]), Y[hold]
    pos, neg = p[t == 1], p[t == 0]
    auc = (pos[:, None] > neg[None, :]).float().mean().item() if len(pos) and len(neg) else float("nan")
    print(f"epoch {epoch}: loss {loss.item():.4f} holdout auc {auc:.4f}")
sample["has_cactus"] = predict(T).numpy()
sample.to_csv(OUT, index=False)
print("wrote", OUT, sample.shape)
'''

SPOOKY = _HEADER + '''
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

train = pd.read_csv(DATA / "train.csv")
test = pd.read_csv(DATA / "test.csv")
sample = pd.read_csv(DATA / "sample_submission.csv")
authors = [c for c in sample.columns if c != "id"]
words = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=3, sublinear_tf=True, max_features=200000)
X = hstack([words.fit_transform(train["text"]), chars.fit_transform(train["text"])]).tocsr()
T = hstack([words.transform(test["text"]), chars.transform(test["text"])]).tocsr()
y = train["author"]
X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.2, random_state=SEED, stratify=y)
model = LogisticRegression(C=4.0, max_iter=1000)
model.fit(X_fit, y_fit)
print("validation log loss:", round(log_loss(y_val, model.predict_proba(X_val), labels=model.classes_), 4))
model.fit(X, y)
proba = pd.DataFrame(model.predict_proba(T), columns=model.classes_)
submission = pd.DataFrame({"id": test["id"]})
for author in authors:
    submission[author] = proba[author].to_numpy()
submission.to_csv(OUT, index=False)
print("wrote", OUT, submission.shape)
'''

TPS_DEC_2021 = _HEADER + '''
from sklearn.ensemble import HistGradientBoostingClassifier

train = pd.read_csv(DATA / "train.csv")
test = pd.read_csv(DATA / "test.csv")
# The full training set has millions of rows; a million is plenty for boosted trees here.
if len(train) > 1_000_000:
    train = train.sample(1_000_000, random_state=SEED)
# Classes seen once or twice (Cover_Type 5 in the real data) cannot be stratified or learned.
counts = train["Cover_Type"].value_counts()
train = train[train["Cover_Type"].isin(counts[counts >= 3].index)]
features = [c for c in train.columns if c not in ("Id", "Cover_Type")]
X, y = train[features], train["Cover_Type"]
model = HistGradientBoostingClassifier(max_iter=300, learning_rate=0.1, early_stopping=True, scoring="accuracy",
                                       validation_fraction=0.15, n_iter_no_change=10, random_state=SEED)
model.fit(X, y)
print(f"{model.n_iter_} rounds, validation accuracy {model.validation_score_[-1]:.4f}")
pd.DataFrame({"Id": test["Id"], "Cover_Type": model.predict(test[features])}).to_csv(OUT, index=False)
print("wrote", OUT, len(test))
'''

TPS_MAY_2022 = _HEADER + '''
from sklearn.ensemble import HistGradientBoostingClassifier

train = pd.read_csv(DATA / "train.csv")
test = pd.read_csv(DATA / "test.csv")


def features(frame):
    """Numeric columns, plus f_27 (a 10-letter code) split into letter positions and its letter count."""
    out = frame.drop(columns=[c for c in ("id", "target", "f_27") if c in frame.columns]).copy()
    code = frame["f_27"].astype(str)
    for i in range(10):
        out[f"f_27_{i}"] = code.str[i].map(lambda ch: ord(ch) - ord("A") if isinstance(ch, str) else -1)
    out["f_27_unique"] = code.map(lambda s: len(set(s)))
    out["f_i02_21"] = frame["f_21"] + frame["f_02"] > 0
    out["f_i05_22"] = frame["f_22"] + frame["f_05"] > 0
    return out


X, y, T = features(train), train["target"], features(test)
model = HistGradientBoostingClassifier(max_iter=500, learning_rate=0.1, max_leaf_nodes=63, early_stopping=True,
                                       scoring="roc_auc", validation_fraction=0.15, n_iter_no_change=15, random_state=SEED)
model.fit(X, y)
print(f"{model.n_iter_} trees, validation auc {model.validation_score_[-1]:.4f}")
pd.DataFrame({"id": test["id"], "target": model.predict_proba(T)[:, 1]}).to_csv(OUT, index=False)
print("wrote", OUT, len(test))
'''

INSULTS = _HEADER + r'''
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

train = pd.read_csv(DATA / "train.csv")
test = pd.read_csv(DATA / "test.csv")
sample_file = sorted(DATA.glob("sample_submission*.csv"))[0]
sample = pd.read_csv(sample_file)


def clean(text):
    # Comments are quoted and carry literal escapes such as \xa0 and \n.
    return text.fillna("").str.strip('"').str.replace(r"\\[nrt]|\\x[0-9a-f]{2}", " ", regex=True).str.lower()


words = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True)
train_text, test_text = clean(train["Comment"]), clean(test["Comment"])
X = hstack([words.fit_transform(train_text), chars.fit_transform(train_text)]).tocsr()
T = hstack([words.transform(test_text), chars.transform(test_text)]).tocsr()
model = LogisticRegression(C=8.0, max_iter=2000)
print("cv auc:", cross_val_score(model, X, train["Insult"], cv=3, scoring="roc_auc").mean().round(4))
model.fit(X, train["Insult"])
submission = test.copy()
submission["Insult"] = model.predict_proba(T)[:, 1]
submission[list(sample.columns)].to_csv(OUT, index=False)
print("wrote", OUT, submission.shape)
'''

NOMAD2018 = _HEADER + '''
from sklearn.ensemble import HistGradientBoostingRegressor

train = pd.read_csv(DATA / "train.csv")
test = pd.read_csv(DATA / "test.csv")
targets = ["formation_energy_ev_natom", "bandgap_energy_ev"]


def features(frame):
    out = frame.drop(columns=[c for c in ["id", *targets] if c in frame.columns]).copy()
    a, b, c = (out[f"lattice_vector_{i}_ang"] for i in (1, 2, 3))
    out["volume"] = a * b * c
    out["atom_density"] = out["number_of_total_atoms"] / out["volume"]
    return out


X, T = features(train), features(test)
submission = pd.DataFrame({"id": test["id"]})
for target in targets:
    # The metric is RMSLE, so fit log1p(target) with squared error and invert.
    y = np.log1p(train[target].clip(lower=0))
    model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, early_stopping=True,
                                          validation_fraction=0.15, n_iter_no_change=15, random_state=SEED)
    model.fit(X, y)
    print(f"{target}: {model.n_iter_} trees, validation rmsle {np.sqrt(-model.validation_score_[-1]):.4f}")
    submission[target] = np.expm1(model.predict(T)).clip(min=0)
submission.to_csv(OUT, index=False)
print("wrote", OUT, submission.shape)
'''


@dataclass(frozen=True)
class Solution:
    """What the scripted agent writes and runs for one competition."""

    script: str
    torch_script: str | None = None  # preferred when `import torch` works in the sandbox
    timeout_s: float = 3600.0


SOLUTIONS: dict[str, Solution] = {
    "aerial-cactus-identification": Solution(CACTUS_SKLEARN, torch_script=CACTUS_CNN),
    "spooky-author-identification": Solution(SPOOKY),
    "tabular-playground-series-dec-2021": Solution(TPS_DEC_2021),
    "tabular-playground-series-may-2022": Solution(TPS_MAY_2022),
    "detecting-insults-in-social-commentary": Solution(INSULTS),
    "nomad2018-predict-transparent-conductors": Solution(NOMAD2018),
}
