"""POPE: the published question files (JSON lines and arrays) and probes built from object
annotations by POPE's negative sampling (random, popular, adversarial)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.sources.ingest import ingest
from mmcurate.sources.pope import probe_object, probe_question, read_label, read_question_id, split_of
from mmcurate.sources.pope_objects import build_probes

from .conftest import load_builder, quarantine_pairs, samples_by_id

SOURCE = "pope"


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pope_raw")
    load_builder("pope").build(path)
    return path


def test_a_clone_of_popes_repository_is_read_as_it_is(raw, tmp_path) -> None:
    # output/coco/coco_pope_random.json beside coco_ground_truth_objects.json, and
    # output/seem/aokvqa/aokvqa_pope_seem_adversarial.json: found recursively, dataset from the name
    result = ingest("pope", raw / "published", tmp_path / "out")
    samples = {sid: {**r, "meta": json.loads(r["meta"])} for sid, r in samples_by_id(result).items()}
    assert sorted(samples) == [
        *(f"aokvqa/adversarial/{i}" for i in (1, 2, 3, 4)),
        *(f"coco/random/{i}" for i in (1, 2, 3, 4, 5, 8, 9)),
    ]
    cup = samples["coco/random/1"]
    assert cup["question"] == "Is there a cup in the image?" and cup["answers"] == ["yes"]
    assert cup["meta"] == {
        "split": "random",
        "dataset": "coco",
        "question_id": 1,
        "object": "cup",
        "image": "COCO_fixture_000001.jpg",
        "origin": "published",
    }
    assert samples["aokvqa/adversarial/2"]["meta"]["object"] == "camera"  # the array file, first copy of id 2
    assert quarantine_pairs(result) == [
        (
            "coco_pope_random.json:5",
            "malformed record: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("coco_pope_random.json:7", "malformed record: label 'maybe' is not yes or no"),
        ("coco_pope_random.json:8", "image file missing: COCO_missing.jpg"),
        ("aokvqa_pope_seem_adversarial.json:2", "duplicate source_id"),
    ]
    assert sorted(Path(f).name for f in result.source_files) == [
        "aokvqa_pope_seem_adversarial.json",
        "coco_pope_random.json",
    ]


def test_a_string_id_is_an_id_and_labels_are_read_as_written(raw, tmp_path) -> None:
    samples = {
        sid: {**r, "meta": json.loads(r["meta"])}
        for sid, r in samples_by_id(ingest("pope", raw / "published", tmp_path / "out")).items()
    }
    # {"question_id": "8", ..., "label": " no"} and {"question_id": 3, ..., "label": "YES"}
    assert samples["coco/random/8"]["meta"]["question_id"] == 8 and samples["coco/random/8"]["answers"] == ["no"]
    assert samples["coco/random/3"]["answers"] == ["yes"]
    assert read_question_id({"question_id": " 12 "}) == 12 and read_label(" No ") == "no"
    with pytest.raises(ValueError, match="missing field question_id"):
        read_question_id({})
    with pytest.raises(ValueError, match="question_id 'q8' is not a whole number"):
        read_question_id({"question_id": "q8"})
    with pytest.raises(ValueError, match="label 'yes please' is not yes or no"):
        read_label("yes please")


def test_one_sets_folder_can_be_given(raw, tmp_path) -> None:
    result = ingest(
        "pope", raw / "published" / "output" / "coco", tmp_path / "out", images=raw / "published" / "images"
    )
    assert {sid.split("/")[0] for sid in samples_by_id(result)} == {"coco"} and result.samples == 7


def test_published_file_names_and_options(raw, tmp_path) -> None:
    assert split_of(Path("coco_pope_adversarial.json")) == ("coco", "adversarial")
    assert split_of(Path("gqa_pope_seem_popular.json")) == ("gqa", "popular")
    assert split_of(Path("coco_ground_truth_objects.json")) is None
    only = ingest("pope", raw / "published", tmp_path / "a", options={"splits": ["adversarial"]})
    assert {sid.split("/")[1] for sid in samples_by_id(only)} == {"adversarial"}
    with pytest.raises(SourceError, match="no question file of the splits"):
        ingest("pope", raw / "published", tmp_path / "b", options={"splits": ["popular"]})
    with pytest.raises(ConfigError, match="pope option splits"):
        ingest("pope", raw / "published", tmp_path / "c", options={"splits": ["hard"]})


def test_question_template() -> None:
    assert probe_question("umbrella") == "Is there an umbrella in the image?"
    assert probe_question("dining table") == "Is there a dining table in the image?"
    assert probe_object("Is there an umbrella in the image?") == "umbrella"
    assert probe_object("Can you see a cat?") is None


OBJECTS = {  # image -> objects in order (the first two are its positives)
    "a.jpg": ["person", "dog", "frisbee"],
    "b.jpg": ["person", "car", "dog"],
    "c.jpg": ["car", "truck"],
    "d.jpg": ["cat", "couch"],
    "e.jpg": ["kite"],  # fewer than sample_num: never probed
}


def test_probes_follow_popes_rules() -> None:
    probes, unasked = build_probes(
        OBJECTS, sample_num=2, images=None, seed=0, splits=["random", "popular", "adversarial"]
    )
    assert not unasked
    for rows in probes.values():
        assert [q for q, *_ in rows] == list(range(1, 17))  # POPE numbers from 1 per split
        assert Counter(label for *_, label in rows) == {"yes": 8, "no": 8}
        by_image: dict[str, list] = {}
        for _, image, name, label in rows:
            by_image.setdefault(image, []).append((name, label))
        assert sorted(by_image) == ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]
        for image, asked in by_image.items():
            assert [label for _, label in asked] == ["yes", "no", "yes", "no"]
            assert [name for name, label in asked if label == "yes"] == OBJECTS[image][:2]
            negatives = [name for name, label in asked if label == "no"]
            assert not set(negatives) & set(OBJECTS[image]) and len(set(negatives)) == 2
    # popular: the most frequent objects not in the image (person 2, dog 2, car 2 before the rest)
    popular = [(image, name) for _, image, name, label in probes["popular"] if label == "no"]
    assert popular[:2] == [("a.jpg", "car"), ("a.jpg", "cat")] and popular[6:] == [("d.jpg", "car"), ("d.jpg", "dog")]
    # adversarial: what most often appears with the positive (person: dog twice, car and frisbee once;
    # car: dog, person and truck once each, ties by name)
    adversarial = [(image, name) for _, image, name, label in probes["adversarial"] if label == "no"]
    assert adversarial[0] == ("a.jpg", "car") and adversarial[4] == ("c.jpg", "dog")
    again, _ = build_probes(OBJECTS, sample_num=2, images=None, seed=0, splits=["random", "popular", "adversarial"])
    assert again == probes  # seeded
    built, unasked = build_probes(OBJECTS, sample_num=2, images=2, seed=3, splits=["random"])
    drawn = built["random"]
    assert {image for _, image, *_ in drawn} == {"b.jpg", "c.jpg"}  # the seed's draw of two images
    # in b.jpg nothing is left to ask after person / truck: car is not asked (no negative for it)
    assert [(name, label) for _, image, name, label in drawn if image == "b.jpg"] == [
        ("person", "yes"),
        ("truck", "no"),
    ]
    assert Counter(label for *_, label in drawn) == {"yes": 3, "no": 3}
    assert unasked == {"random": 1}  # counted, never a silent gap


def test_probes_built_from_coco_instances(raw, tmp_path) -> None:
    result = ingest(
        "pope_objects", raw / "objects", tmp_path / "out", options={"dataset": "fixture", "sample_num": 2, "seed": 13}
    )
    samples = {sid: {**r, "meta": json.loads(r["meta"])} for sid, r in samples_by_id(result).items()}
    assert len(samples) == 48 and result.skipped == {"fewer than 2 objects": 1}  # chelsea has only the cat
    assert quarantine_pairs(result) == [
        ("instances_fixture.json:annotations[12]", "annotation names an unknown image or category")
    ]
    coffee = [
        s
        for s in samples.values()
        if s["meta"]["image"] == "COCO_fixture_000001.jpg" and s["meta"]["split"] == "random"
    ]
    # positives by annotated area, largest first: saucer, then cup (the spoon is smaller)
    assert [s["meta"]["object"] for s in coffee if s["answers"] == ["yes"]] == ["saucer", "cup"]
    assert all(s["meta"]["origin"] == "built" and s["source"] == "pope_objects" for s in samples.values())


def test_popes_own_objects_layout_and_bad_options(raw, tmp_path) -> None:
    root = tmp_path / "objects"
    (root / "images").mkdir(parents=True)
    for name in ("COCO_fixture_000001.jpg", "COCO_fixture_000002.jpg"):
        (root / "images" / name).write_bytes((raw / "objects" / "images" / name).read_bytes())
    (root / "objects.jsonl").write_text(
        json.dumps({"image": "COCO_fixture_000001.jpg", "objects": ["cup", "saucer"], "image_id": 1})
        + "\n"
        + json.dumps({"image": "COCO_fixture_000002.jpg", "objects": ["person", "flag"]})
        + "\n"
        + json.dumps({"image": "gone.jpg", "objects": ["car", "bus"]})
        + "\n"
        + json.dumps({"image": "x.jpg", "objects": "cup"})
        + "\n"
    )
    result = ingest("pope_objects", root, tmp_path / "out", options={"sample_num": 2, "splits": ["popular"]})
    samples = samples_by_id(result)
    assert len(samples) == 8 and all(sid.startswith("custom/popular/") for sid in samples)
    assert quarantine_pairs(result) == [
        ("objects.jsonl:4", "malformed annotation: needs image and a list of objects"),
        ("objects.jsonl:gone.jpg", "image file missing: gone.jpg"),
    ]
    with pytest.raises(ConfigError, match="pope_objects option sample_num"):
        ingest("pope_objects", root, tmp_path / "bad", options={"sample_num": 0})
    with pytest.raises(SourceError, match="no objects.jsonl or instances"):
        ingest("pope_objects", tmp_path / "out", tmp_path / "none")


def test_pope_objects_says_what_it_could_not_use(raw, tmp_path) -> None:
    root = tmp_path / "objects"
    (root / "images").mkdir(parents=True)
    (root / "objects.jsonl").write_text("")  # an empty objects file: a quarantine row, never a silent 0
    empty = ingest("pope_objects", root, tmp_path / "empty")
    assert empty.samples == 0 and quarantine_pairs(empty) == [
        ("objects.jsonl", "no image with objects in the annotations file: nothing to probe")
    ]
    (root / "images" / "COCO_fixture_000001.jpg").write_bytes(
        (raw / "objects" / "images" / "COCO_fixture_000001.jpg").read_bytes()
    )
    (root / "objects.jsonl").write_text(  # a vocabulary too small: every object is in the one usable image
        json.dumps({"image": "COCO_fixture_000001.jpg", "objects": ["cup", "saucer"]})
        + "\n"
        + json.dumps({"image": "COCO_fixture_000001.jpg", "objects": ["spoon"]})
        + "\n"
        + json.dumps({"image": "COCO_fixture_000002.jpg", "objects": ["person"]})
        + "\n"
    )
    result = ingest("pope_objects", root, tmp_path / "small", options={"sample_num": 2, "splits": ["random"]})
    assert result.samples == 0
    assert result.skipped == {"fewer than 2 objects": 1, "random: positive with no object left to ask about": 2}
    assert json.loads((result.out / "ingest.json").read_text())["skipped"] == result.skipped
    assert (
        "skipped: 1 (fewer than 2 objects), 2 (random: positive with no object left to ask about)" in result.summary()
    )
