"""Google Smartphone Decimeter Challenge 2022: MLE-bench's split of the drives by date, graded by positioning error.

MLE-bench's held-out drives keep `supplemental/span_log.nmea`, the log of the reference receiver
whose track is the ground truth (its issue #93): task version "fixed" leaves it out of public/test/.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from functools import reduce
from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.helpers import split_seed
from mle_gym.competitions.high_data import copy_tree, read_csv_like_pandas2
from mle_gym.grading.science_metrics import haversine_m, positioning_score
from mle_gym.grading.validation import check_columns, check_numeric
from sklearn.model_selection import train_test_split

from mle_gym.errors import InvalidSubmissionError

TRIP, TIME, LAT, LON = "tripId", "UnixTimeMillis", "LatitudeDegrees", "LongitudeDegrees"
SAMPLE_POSITION = (37.904611315634504, -86.48107806249548)  # MLE-bench's constant guess for every row
PHONES = ["GooglePixel4", "GooglePixel4XL", "GooglePixel5", "SamsungGalaxyS20Ultra", "XiaomiMi8"]
GROUND_TRUTH = "ground_truth.csv"
SPAN_LOG = "span_log.nmea"


def drive_date(drive: str) -> str:
    """The day a drive was recorded, from its id `YYYY-MM-DD-<area>-<n>` (month and day zero-padded)."""
    parts = drive.split("-")
    if len(parts) < 3 or not all(p.isdigit() for p in parts[:3]):
        raise ValueError(f"expected a drive id starting YYYY-MM-DD; found {drive!r}")
    return f"{parts[0]}-{parts[1].zfill(2)}-{parts[2].zfill(2)}"


def prepare(raw: Path, public: Path, private: Path) -> None:
    """10% of the recording days held out (seed 0) with every drive of those days.

    The held-out phones' ground truth (their `ground_truth.csv`, concatenated in path order
    with a `tripId` of `<drive>-<phone>`) is the answers; it is left out of public/test/.
    """
    _prepare(raw, public, private, hidden=(GROUND_TRUTH,))


def prepare_fixed(raw: Path, public: Path, private: Path) -> None:
    """The same split; public/test/ also leaves out each phone's supplemental/span_log.nmea."""
    _prepare(raw, public, private, hidden=(GROUND_TRUTH, SPAN_LOG))


def _prepare(raw: Path, public: Path, private: Path, hidden: tuple[str, ...]) -> None:
    drives = sorted(p.name for p in (raw / "train").iterdir() if p.is_dir())
    dates = sorted({drive_date(d) for d in drives})
    _, test_dates = train_test_split(dates, test_size=0.1, random_state=split_seed(0))
    answers = []
    for drive in drives:
        if drive_date(drive) not in test_dates:
            copy_tree(raw / "train" / drive, public / "train" / drive)
            continue
        shutil.copytree(raw / "train" / drive, public / "test" / drive, ignore=shutil.ignore_patterns(*hidden))
        for phone in sorted(p.name for p in (raw / "train" / drive).iterdir() if (p / GROUND_TRUTH).is_file()):
            truth = read_csv_like_pandas2(raw / "train" / drive / phone / GROUND_TRUTH)
            answers.append(truth.assign(**{TRIP: f"{drive}-{phone}"})[[TRIP, TIME, LAT, LON]])
    copy_tree(raw / "metadata", public / "metadata")
    new_test = pd.concat(answers, ignore_index=True)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.assign(**{LAT: SAMPLE_POSITION[0], LON: SAMPLE_POSITION[1]}).to_csv(
        public / "sample_submission.csv", index=False)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """MLE-bench's checks, then its pairing: within each trip, rows pair with the answers' rows by position.

    Every trip needs exactly as many rows as it has epochs, in the answers' (the sample
    submission's) time order; `UnixTimeMillis` must be there but is not read.
    """
    check_columns(submission, [TRIP, TIME, LAT, LON])
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows (one per test epoch), found {len(submission)}")
    check_numeric(submission, [LAT, LON])
    codes, trips = pd.factorize(answers[TRIP])
    sub_codes = pd.Index(trips).get_indexer(submission[TRIP])
    expected = np.bincount(codes, minlength=len(trips))
    found = np.bincount(sub_codes[sub_codes >= 0], minlength=len(trips))
    wrong = np.flatnonzero(expected != found)
    if len(wrong):
        k = int(wrong[0])
        raise InvalidSubmissionError(
            f"expected each trip's rows in {TRIP!r} as many times as it has test epochs; {len(wrong)} trip(s) differ, "
            f"e.g. {trips[k]!r} has {expected[k]} epochs and {found[k]} submission rows")
    ans_order = np.argsort(codes, kind="stable")
    sub_order = np.argsort(sub_codes, kind="stable")
    order = np.empty(len(answers), dtype=np.intp)
    order[ans_order] = sub_order
    return submission.take(order).reset_index(drop=True)


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    errors = haversine_m(aligned[LAT].to_numpy(dtype=float), aligned[LON].to_numpy(dtype=float),
                         answers[LAT].to_numpy(dtype=float), answers[LON].to_numpy(dtype=float))
    return positioning_score(pd.factorize(answers[TRIP])[0], errors)


def _nmea(body: str) -> str:
    """One NMEA 0183 sentence: `$`, the body, `*` and the XOR of the body's bytes in hex."""
    return f"${body}*{reduce(lambda a, b: a ^ b, body.encode(), 0):02X}"


def _degrees_minutes(value: float, width: int) -> str:
    degrees = int(abs(value))
    return f"{degrees:0{width}d}{(abs(value) - degrees) * 60:011.8f}"


def span_log(truth: pd.DataFrame) -> str:
    """The reference receiver's NMEA log of a track (GGA and RMC sentences, one pair per epoch, UTC)."""
    lines = []
    for row in truth.itertuples(index=False):
        row = row._asdict()
        when = datetime.fromtimestamp(row[TIME] / 1000, tz=timezone.utc)
        clock = f"{when:%H%M%S}.{when.microsecond // 10000:02d}"
        lat = f"{_degrees_minutes(row[LAT], 2)},{'N' if row[LAT] >= 0 else 'S'}"
        lon = f"{_degrees_minutes(row[LON], 3)},{'E' if row[LON] >= 0 else 'W'}"
        lines.append(_nmea(f"GPGGA,{clock},{lat},{lon},4,18,0.7,{row['AltitudeMeters']:.3f},M,-32.000,M,,"))
        knots = row["SpeedMps"] * 3600 / 1852
        lines.append(_nmea(f"GPRMC,{clock},A,{lat},{lon},{knots:.3f},{row['BearingDegrees']:.2f},{when:%d%m%y},,,D"))
    return "\r\n".join(lines) + "\r\n"


def _phone_files(rng: np.random.Generator, folder: Path, start: int, epochs: int, origin: np.ndarray) -> None:
    """One phone's recording: GNSS and IMU logs, supplemental raw logs and the reference track."""
    folder.mkdir(parents=True)
    times = start + 1000 * np.arange(epochs)
    track = origin + np.cumsum(rng.normal(0, 1.5e-4, size=(epochs, 2)), axis=0)
    truth = pd.DataFrame({
        "MessageType": "Fix", "Provider": "GT", LAT: track[:, 0].round(9), LON: track[:, 1].round(9),
        "AltitudeMeters": rng.normal(20, 3, epochs).round(3), "SpeedMps": rng.gamma(4, 3, epochs).round(6),
        "AccuracyMeters": 0.1, "BearingDegrees": rng.uniform(0, 360, epochs).round(6), TIME: times,
    })
    truth.to_csv(folder / GROUND_TRUTH, index=False)
    # The raw logs are written as text: pandas' writer costs more than the sample data's whole budget here.
    sats = rng.choice(32, 4, replace=False) + 1
    gnss = ["MessageType,utcTimeMillis,Svid,ConstellationType,Cn0DbHz,RawPseudorangeMeters"]
    gnss += [f"Raw,{t},{sv},1,{rng.uniform(15, 45):.3f},{rng.uniform(2.0e7, 2.6e7):.3f}" for t in times for sv in sats]
    (folder / "device_gnss.csv").write_text("\n".join(gnss) + "\n")
    imu = ["MessageType,utcTimeMillis,MeasurementX,MeasurementY,MeasurementZ,BiasX,BiasY,BiasZ"]
    imu += [f"{kind},{t},{x:.6f},{y:.6f},{z:.6f},0.0,0.0,0.0" for t in times for kind in ("UncalAccel", "UncalGyro")
            for x, y, z in [rng.normal([0, 0, 9.8], 0.3)]]
    (folder / "device_imu.csv").write_text("\n".join(imu) + "\n")
    (folder / "supplemental").mkdir()
    (folder / "supplemental" / "gnss_log.txt").write_text(f"# Version: v3.0.0.1 Platform: 11\n# Raw,{start}\n")
    # as in Kaggle's drives, the reference receiver's log: the ground truth's own track
    (folder / "supplemental" / SPAN_LOG).write_bytes(span_log(truth).encode())


def make_raw(raw: Path, seed: int, n_dates: int = 10, n_hidden: int = 1, epochs: int = 8) -> None:
    """Kaggle's download: train/<drive>/<phone>/ (GNSS, IMU, supplemental logs, ground_truth.csv), test/ (the same
    without ground truth), metadata/ and sample_submission.csv."""
    rng = np.random.default_rng(seed)
    days = sorted(pd.Timestamp("2020-05-01") + pd.Timedelta(days=int(d)) for d in rng.choice(800, n_dates + n_hidden, replace=False))
    areas = [("US-MTV", (37.42, -122.08)), ("US-SJC", (37.33, -121.89)), ("US-LAX", (34.05, -118.24))]
    hidden_days = set(rng.choice(len(days), size=n_hidden, replace=False).tolist())
    sample = []
    for k, day in enumerate(days):
        side = "test" if k in hidden_days else "train"
        for drive_no in range(1, int(rng.integers(1, 3)) + 1):
            area, origin = areas[int(rng.integers(0, len(areas)))]
            drive = f"{day:%Y-%m-%d}-{area}-{drive_no}"
            start = int(day.timestamp() * 1000) + int(rng.integers(0, 8 * 3600)) * 1000
            for phone in sorted(rng.choice(PHONES, size=int(rng.integers(1, 3)), replace=False)):
                _phone_files(rng, raw / side / drive / phone, start, epochs, np.asarray(origin))
                if side == "test":  # a test drive comes without the reference track, and so without its log
                    (raw / side / drive / phone / GROUND_TRUTH).unlink()
                    (raw / side / drive / phone / "supplemental" / SPAN_LOG).unlink()
                    sample.extend({TRIP: f"{drive}-{phone}", TIME: start + 1000 * e, LAT: SAMPLE_POSITION[0],
                                   LON: SAMPLE_POSITION[1]} for e in range(epochs))
    (raw / "metadata").mkdir()
    (raw / "metadata" / "raw_state_bit_map.json").write_text('{"0": "STATE_UNKNOWN", "1": "STATE_CODE_LOCK"}\n')
    (raw / "metadata" / "accumulated_delta_range_state_bit_map.json").write_text('{"0": "ADR_STATE_UNKNOWN", "1": "ADR_STATE_VALID"}\n')
    pd.DataFrame(sample, columns=[TRIP, TIME, LAT, LON]).to_csv(raw / "sample_submission.csv", index=False)
    if not (raw / "test").exists():
        (raw / "test").mkdir()


# Sample data: 20 recording days (one or two drives each, one or two phones per drive, 12 epochs per phone); 2 days are held out.
SAMPLE_RAW = {"n_dates": 20, "n_hidden": 0, "epochs": 12}
