"""Lyft 3D Object Detection for Autonomous Vehicles: MLE-bench's split of the labelled logs, and sample data.

The download is nuScenes-style: `train_data/*.json` tables, camera images, lidar sweeps and a map.
MLE-bench holds out 20% of the logs (scenes); every table, image and sweep follows its sample's log.
The answers (private `test.csv`) hold each test sample's boxes with a confidence of 1 prepended.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from mle_gym.competitions.boxes import hex_ids
from mle_gym.competitions.helpers import split_seed
from mle_gym.grading.box_metrics import lyft_map, parse_lyft
from mle_gym.grading.validation import align_to_answers, check_columns, check_ids
from sklearn.model_selection import train_test_split

TEST_SIZE = 0.2
SEED = 0
MAP = "map_raster_palo_alto.png"
COPIED = ["attribute.json", "category.json", "sensor.json", "visibility.json"]
CLASSES = ["car", "pedestrian", "truck", "bicycle", "other_vehicle", "bus", "motorcycle", "emergency_vehicle", "animal"]


def _load(path: Path) -> list[dict]:
    with path.open() as handle:
        return json.load(handle)


def _dump(records: object, path: Path) -> None:
    with path.open("w") as handle:
        json.dump(records, handle)


def _add_confidence(text: str) -> str:
    tokens = text.split(" ")
    if len(tokens) % 8:
        raise ValueError(f"expected 8 fields per object in train.csv; found {len(tokens)}")
    return " ".join(" ".join(["1.0", *tokens[i : i + 8]]) for i in range(0, len(tokens), 8))


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Hold out 20% of the logs (seed 0); samples, annotations, sensors, poses, images and sweeps follow."""
    data = raw / "train_data"
    train_dir, test_dir = public / "train_data", public / "test_data"
    test_dir.mkdir(parents=True)
    train_dir.mkdir(parents=True)

    logs = _load(data / "log.json")
    log_ids = [log["token"] for log in logs]
    if len(log_ids) != len(set(log_ids)):
        raise ValueError("expected unique log tokens")
    train_logs, test_logs = train_test_split(log_ids, test_size=TEST_SIZE, random_state=split_seed(SEED))
    train_set, test_set = set(train_logs), set(test_logs)
    _dump([log for log in logs if log["token"] in train_set], train_dir / "log.json")
    _dump([log for log in logs if log["token"] in test_set], test_dir / "log.json")

    # MLE-bench matches a sample's scene token against the log tokens (Lyft's scenes share their log's token)
    samples = _load(data / "sample.json")
    train_samples = [s for s in samples if s["scene_token"] in train_set]
    test_samples = [s for s in samples if s["scene_token"] in test_set]
    if len(train_samples) + len(test_samples) != len(samples):
        raise ValueError("expected every sample's scene_token to be a log token")
    _dump(train_samples, train_dir / "sample.json")
    _dump(test_samples, test_dir / "sample.json")

    train_df = pd.read_csv(raw / "train.csv")
    train_tokens = {s["token"] for s in train_samples}
    test_tokens = {s["token"] for s in test_samples}
    new_train = train_df[train_df["Id"].isin(train_tokens)]
    new_test = train_df[train_df["Id"].isin(test_tokens)].copy()
    if len(new_train) != len(train_samples) or len(new_test) != len(test_samples) or \
            len(new_train) + len(new_test) != len(train_df):
        raise ValueError("expected train.csv to hold exactly one row per sample")
    new_train.to_csv(public / "train.csv", index=False)
    new_test["PredictionString"] = new_test["PredictionString"].apply(_add_confidence)
    new_test.to_csv(private / "test.csv", index=False)
    sample_submission = new_test[["Id"]].copy()
    sample_submission["PredictionString"] = ""
    sample_submission.to_csv(public / "sample_submission.csv", index=False)

    train_ids, test_ids = set(new_train["Id"]), set(new_test["Id"])

    def split(records: list[dict], key: str, what: str) -> tuple[list[dict], list[dict]]:
        a, b = [], []
        for record in records:
            if record[key] in train_ids:
                a.append(record)
            elif record[key] in test_ids:
                b.append(record)
            else:
                raise ValueError(f"{what} {record[key]} belongs to no sample of train.csv")
        return a, b

    sample_data = _load(data / "sample_data.json")
    train_sd, test_sd = split(sample_data, "sample_token", "sample_data's sample")
    _dump(train_sd, train_dir / "sample_data.json")
    _dump(test_sd, test_dir / "sample_data.json")

    for folder in ("test_maps", "train_maps"):
        (public / folder).mkdir()
        shutil.copyfile(raw / "train_maps" / MAP, public / folder / MAP)
    shutil.copyfile(data / "attribute.json", train_dir / "attribute.json")
    shutil.copyfile(data / "attribute.json", test_dir / "attribute.json")

    calibrations = {c["token"]: c for c in _load(data / "calibrated_sensor.json")}
    for part, folder in ((train_sd, train_dir), (test_sd, test_dir)):
        used = dict.fromkeys(d["calibrated_sensor_token"] for d in part)  # first use order, once each
        _dump([calibrations[t] for t in used], folder / "calibrated_sensor.json")
    shutil.copyfile(data / "category.json", train_dir / "category.json")
    shutil.copyfile(data / "category.json", test_dir / "category.json")

    poses = {e["token"]: e for e in _load(data / "ego_pose.json")}
    for part, folder in ((train_sd, train_dir), (test_sd, test_dir)):
        _dump([poses[d["ego_pose_token"]] for d in part], folder / "ego_pose.json")

    # MLE-bench edits one shared map record for both halves, so both files list the test logs
    maps = _load(data / "map.json")
    if len(maps) != 1:
        raise ValueError(f"expected one map in map.json; found {len(maps)}")
    maps[0]["log_tokens"] = test_logs
    _dump(maps, train_dir / "map.json")
    _dump(maps, test_dir / "map.json")

    scenes = _load(data / "scene.json")
    train_scenes = [s for s in scenes if s["log_token"] in train_set]
    test_scenes = [s for s in scenes if s["log_token"] in test_set]
    if len(train_scenes) + len(test_scenes) != len(scenes):
        raise ValueError("expected every scene's log_token in log.json")
    _dump(train_scenes, train_dir / "scene.json")
    _dump(test_scenes, test_dir / "scene.json")
    for name in ("sensor.json", "visibility.json"):
        shutil.copyfile(data / name, train_dir / name)
        shutil.copyfile(data / name, test_dir / name)

    annotations = _load(data / "sample_annotation.json")
    train_ann, test_ann = split(annotations, "sample_token", "sample_annotation's sample")
    _dump(train_ann, train_dir / "sample_annotation.json")
    train_instances = {a["instance_token"] for a in train_ann}
    test_instances = {a["instance_token"] for a in test_ann}
    kept = []
    for instance in _load(data / "instance.json"):
        if instance["token"] in train_instances:
            kept.append(instance)
        elif instance["token"] not in test_instances:
            raise ValueError(f"instance {instance['token']} has no annotation")
    _dump(kept, train_dir / "instance.json")

    for folder in ("test_images", "train_images", "test_lidar", "train_lidar"):
        (public / folder).mkdir()
    for datum in sample_data:
        name = Path(datum["filename"]).name
        kind = {"jpeg": "images", "bin": "lidar"}.get(datum["fileformat"])
        if kind is None:
            raise ValueError(f"unexpected fileformat {datum['fileformat']!r} in sample_data.json")
        source = raw / f"train_{kind}" / name
        if not source.is_file():
            raise FileNotFoundError(f"expected {source}")
        dest = public / f"{'test' if datum['sample_token'] in test_ids else 'train'}_{kind}" / name
        if not dest.exists():
            shutil.copyfile(source, dest)


def validate(submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """`Id` and `PredictionString`, each test sample once; a blank row predicts no boxes (as in MLE-bench).
    Boxes are `confidence x y z width length height yaw class` groups split on single spaces."""
    check_columns(submission, ["Id", "PredictionString"])
    check_ids(submission, answers, "Id")
    aligned = align_to_answers(submission, answers, "Id")
    texts = aligned["PredictionString"]
    texts = texts.astype(object).where(texts.notna(), "")
    parse_lyft(texts.tolist(), aligned["Id"].tolist())  # raises on a malformed row
    return aligned.assign(PredictionString=texts.tolist())


def score(aligned: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Lyft's 3D mAP over IoU thresholds 0.5 to 0.95, averaged over samples (see `lyft_map`)."""
    boxes = parse_lyft(aligned["PredictionString"].tolist(), aligned["Id"].tolist())
    truth = parse_lyft(answers["PredictionString"].tolist(), answers["Id"].tolist())
    return lyft_map(boxes, truth, len(answers))


def _token(rng: np.random.Generator) -> str:
    return hex_ids(rng, 1, 64)[0]


def make_raw(raw: Path, seed: int, n_logs: int = 5, samples_per_log: int = 2) -> None:
    """Kaggle's download: train.csv, sample_submission.csv, train_data/*.json (nuScenes tables), train_images/
    (*.jpeg), train_lidar/ (*.bin), train_maps/map_raster_palo_alto.png, and a token test_* part.

    Images and sweeps are a few placeholder bytes; each sample has one camera image and one lidar sweep.
    """
    rng = np.random.default_rng(seed)
    data = raw / "train_data"
    for folder in ("train_data", "train_images", "train_lidar", "train_maps", "test_data", "test_images",
                   "test_lidar", "test_maps"):
        (raw / folder).mkdir()
    n_tokens = 16 * n_logs * samples_per_log + 4 * n_logs + 64
    tokens = iter(hex_ids(rng, n_tokens, 32))
    sensors = [{"token": next(tokens), "channel": ch, "modality": mod} for ch, mod in (("CAM_FRONT", "camera"), ("LIDAR_TOP", "lidar"))]
    categories = [{"token": next(tokens), "name": c, "description": ""} for c in CLASSES]
    attributes = [{"token": next(tokens), "name": a, "description": ""} for a in ("object_action_parked", "object_action_driving_straight_forward")]
    visibility = [{"token": str(k + 1), "level": lvl, "description": ""} for k, lvl in enumerate(["v0-40", "v40-60", "v60-80", "v80-100"])]
    logs, scenes, samples, sample_data, poses, calibrated, annotations, instances, rows = [], [], [], [], [], [], [], [], []
    for k in range(n_logs):
        log_token = _token(rng)
        vehicle = f"host-a{int(rng.integers(0, 20)):03d}"
        logs.append({"mapfile": "", "vehicle": vehicle, "date_captured": "2019-05-24", "location": "Palo Alto",
                     "logfile": f"{vehicle}-lidar0-{k}", "token": log_token})
        cams = [{"token": next(tokens), "sensor_token": s["token"], "translation": [1.0, 0.0, 1.5],
                 "rotation": [1.0, 0.0, 0.0, 0.0], "camera_intrinsic": []} for s in sensors]
        calibrated.extend(cams)
        sample_tokens = [_token(rng) for _ in range(samples_per_log)]
        scenes.append({"description": "", "log_token": log_token, "name": f"{vehicle}-{k}", "nbr_samples": samples_per_log,
                       "first_sample_token": sample_tokens[0], "last_sample_token": sample_tokens[-1], "token": log_token})
        centre = rng.uniform(500, 2500, 2)
        for i, token in enumerate(sample_tokens):
            timestamp = 1558700000000000 + k * 10**8 + i * 200000
            samples.append({"next": sample_tokens[i + 1] if i + 1 < samples_per_log else "",
                            "prev": sample_tokens[i - 1] if i else "", "token": token,
                            "timestamp": timestamp, "scene_token": log_token})
            for cam, (fmt, folder) in zip(cams, (("jpeg", "images"), ("bin", "lidar"))):
                pose = {"token": next(tokens), "timestamp": timestamp, "rotation": [1.0, 0.0, 0.0, 0.0],
                        "translation": [float(centre[0]), float(centre[1]), -20.0]}
                poses.append(pose)
                channel = "cam0" if fmt == "jpeg" else "lidar_top"
                name = f"{vehicle}_{channel}_{timestamp}.{fmt}"
                sample_data.append({"is_key_frame": True, "prev": "", "fileformat": fmt, "token": next(tokens),
                                    "timestamp": timestamp, "next": "", "ego_pose_token": pose["token"],
                                    "sample_token": token, "calibrated_sensor_token": cam["token"],
                                    "filename": f"{folder}/{name}"})
                (raw / f"train_{folder}" / name).write_bytes(rng.integers(0, 256, size=24, dtype=np.uint8).tobytes())
            objects = []
            for _ in range(int(rng.integers(1, 6))):
                name = str(rng.choice(CLASSES[:5], p=[0.6, 0.15, 0.1, 0.05, 0.1]))
                size = [round(float(v), 3) for v in (rng.uniform(0.6, 2.6), rng.uniform(0.6, 10), rng.uniform(1, 3.5))]
                centre_obj = [float(centre[0] + rng.normal(0, 15)), float(centre[1] + rng.normal(0, 15)), float(rng.uniform(-22, -18))]
                yaw = float(rng.uniform(-np.pi, np.pi))
                objects.append(" ".join(repr(v) for v in [*centre_obj, *size, yaw]) + f" {name}")
                instance = {"token": next(tokens), "category_token": categories[CLASSES.index(name)]["token"],
                            "nbr_annotations": 1}
                annotation = {"token": next(tokens), "num_lidar_pts": int(rng.integers(1, 200)), "size": size,
                              "sample_token": token, "rotation": [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))],
                              "prev": "", "translation": centre_obj, "num_radar_pts": 0,
                              "attribute_tokens": [attributes[0]["token"]], "next": "",
                              "instance_token": instance["token"], "visibility_token": "4"}
                instance["first_annotation_token"] = instance["last_annotation_token"] = annotation["token"]
                instances.append(instance)
                annotations.append(annotation)
            rows.append({"Id": token, "PredictionString": " ".join(objects)})
    maps = [{"log_tokens": [log["token"] for log in logs], "category": "semantic_prior",
             "filename": f"maps/{MAP}", "token": next(tokens)}]
    tables = {"log": logs, "scene": scenes, "sample": samples, "sample_data": sample_data, "ego_pose": poses,
              "calibrated_sensor": calibrated, "sensor": sensors, "category": categories, "attribute": attributes,
              "visibility": visibility, "sample_annotation": annotations, "instance": instances, "map": maps}
    for name, records in tables.items():
        _dump(records, data / f"{name}.json")
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)
    png = bytes.fromhex("89504e470d0a1a0a")
    (raw / "train_maps" / MAP).write_bytes(png)
    (raw / "test_maps" / MAP).write_bytes(png)
    # the hidden test part, reduced to one sample: Kaggle's test tables lack annotations and instances
    hidden = _token(rng)
    for name in ("log", "scene", "sensor", "category", "attribute", "visibility", "map"):
        _dump(tables[name][:1], raw / "test_data" / f"{name}.json")
    _dump([{"token": hidden, "timestamp": 0, "prev": "", "next": "", "scene_token": logs[0]["token"]}], raw / "test_data" / "sample.json")
    (raw / "test_images" / "host-a101_cam0_0.jpeg").write_bytes(png)
    (raw / "test_lidar" / "host-a101_lidar_top_0.bin").write_bytes(png)
    pd.DataFrame({"Id": [hidden], "PredictionString": [""]}).to_csv(raw / "sample_submission.csv", index=False)


SAMPLE_RAW = {"n_logs": 10, "samples_per_log": 12}
