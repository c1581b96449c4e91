"""Grounding backends (boxes, saliency, pointing, SAM 2) and the grounding-and-marks stage."""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest
from PIL import Image, ImageDraw

from mmcurate.annotation.grounders import (
    BoxesGrounder,
    Instance,
    PointingGrounder,
    Query,
    SaliencyGrounder,
    Sam2Segmenter,
    load_regions,
    parse_points,
)
from mmcurate.annotation.marks import rgb
from mmcurate.annotation.reflectv.chains import issues_of, turns_of, with_chains
from mmcurate.annotation.reflectv.grounding import GroundAndMark, locate_phrase
from mmcurate.core.errors import MmcurateError
from mmcurate.core.specs import Sam2

from .conftest import png

Q = "What animal is in the picture?"


def _regions(lab, sha: str, regions: list[tuple[str, list[float]]]) -> None:
    (lab.root / "regions.jsonl").write_text(
        "".join(
            json.dumps({"image": "x.png", "sha256": sha, "label": label, "box": box}) + "\n" for label, box in regions
        )
    )


def test_boxes_grounder_picks_the_best_matching_labels(lab) -> None:
    sha = lab.image()
    _regions(
        lab,
        sha,
        [
            ("long whiskers", [10, 60, 110, 85]),
            ("cat eyes", [20, 20, 40, 35]),
            ("cat eyes", [70, 20, 90, 35]),
            ("red rug", [0, 0, 5, 5]),
        ],
    )
    grounder = BoxesGrounder(lab.root)
    found = grounder.locate(
        [
            Query("a", sha, "long whiskers near the nose"),
            Query("b", sha, "the cat's eyes"),
            Query("c", sha, "a blue sky"),
            Query("d", "0" * 64, "eyes"),
        ],
        lab.ctx(),
    )
    assert [len(f.instances) for f in found] == [1, 2, 0, 0]
    assert found[0].instances[0].box == (10.0, 60.0, 110.0, 85.0) and found[0].instances[0].point == (60.0, 72.5)
    assert found[1].detail["regions"] == ["cat eyes", "cat eyes"] and found[2].error is None


def test_regions_files_are_checked(lab, tmp_path) -> None:
    bad = tmp_path / "bad" / "regions.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"sha256": "ab", "label": "x", "box": [5, 5, 1, 1]}\n')
    with pytest.raises(MmcurateError, match="regions.jsonl:1: a region needs"):
        load_regions(bad.parent)
    with pytest.raises(MmcurateError, match="no regions.jsonl"):
        load_regions(tmp_path / "nowhere")


def test_saliency_finds_the_odd_blob(lab) -> None:
    img = Image.new("RGB", (160, 120), (90, 90, 90))
    ImageDraw.Draw(img).ellipse((100, 20, 130, 50), fill=(250, 250, 250))
    buffer = io.BytesIO()
    img.save(buffer, format="PNG")
    [found] = SaliencyGrounder().locate([Query("a", lab.image(buffer.getvalue()), "anything")], lab.ctx())
    [instance] = found.instances
    x0, y0, x1, y1 = instance.box
    assert x0 < 115 < x1 and y0 < 35 < y1 and 95 <= instance.point[0] <= 135 and 15 <= instance.point[1] <= 55
    assert found.detail == {"keyword_used": False}


@pytest.mark.parametrize(
    "reply, points",
    [
        ('<point x="61.5" y="40.6" alt="cat">cat</point>', [(0.615, 0.406)]),
        ('<points x1="10" y1="20" x2="90.5" y2="80" alt="eyes">eyes</points>', [(0.1, 0.2), (0.905, 0.8)]),
        ("There are no whiskers in this image.", None),
        ('<point x="161.5" y="40.6" alt="cat">cat</point>', None),
    ],
)
def test_molmo_points_are_read_strictly(reply, points) -> None:
    found = parse_points(reply)
    if points is None:
        assert found is None
    else:
        assert [pytest.approx(p) for p in points] == found


def test_pointing_grounder_asks_a_vision_model_and_scales_to_pixels(lab) -> None:
    sha = lab.image(png(size=(200, 100)))
    molmo = lab.model(
        "molmo",
        [
            {"when_all": ["Point to the whiskers."], "answer": '<point x="25" y="50" alt="w">w</point>'},
            {"when_all": ["Reply with points only"], "answer": "still nothing"},
        ],
        default="I cannot see that.",
        vision=True,
    )
    found = PointingGrounder(molmo).locate([Query("a", sha, "whiskers"), Query("b", sha, "unicorn")], lab.ctx())
    assert [i.point for i in found[0].instances] == [(50.0, 50.0)]
    assert found[1].instances == [] and "unparsable" in found[1].error
    blind = lab.model("blind", [], default="x")
    with pytest.raises(MmcurateError, match="cannot see images"):
        PointingGrounder(blind).locate([Query("a", sha, "x")], lab.ctx())


def test_sam2_needs_its_checkpoint_and_package(tmp_path) -> None:
    with pytest.raises(MmcurateError, match="checkpoint not found"):
        Sam2Segmenter(Sam2(config="c.yaml", checkpoint=tmp_path / "missing.pt")).predictor()
    checkpoint = tmp_path / "sam.pt"
    checkpoint.write_bytes(b"weights")
    with pytest.raises(MmcurateError, match=r"pip install 'mmcurate\[sam2\]'"):
        Sam2Segmenter(Sam2(config="c.yaml", checkpoint=checkpoint)).predictor()


def test_sam2_masks_come_from_the_points(tmp_path) -> None:
    class FakePredictor:
        def set_image(self, image: np.ndarray) -> None:
            self.shape = image.shape[:2]

        def predict(self, point_coords, point_labels, multimask_output):
            mask = np.zeros((1, *self.shape), dtype=bool)
            x, y = point_coords[0].astype(int)
            mask[0, y - 5 : y + 5, x - 8 : x + 8] = True
            return mask, np.ones(1), None

    segmenter = Sam2Segmenter(Sam2(config="c.yaml", checkpoint=tmp_path / "sam.pt"))
    segmenter._predictor = FakePredictor()
    [instance] = segmenter.refine(Image.new("RGB", (100, 60)), [Instance((40.0, 30.0))])
    assert instance.box == (32.0, 25.0, 48.0, 35.0) and instance.mask.sum() == 160


def test_stage_marks_each_reflective_turn_and_words_it(lab) -> None:
    sha = lab.image(png(size=(160, 120)))
    _regions(
        lab,
        sha,
        [("long whiskers", [20, 70, 140, 110]), ("cat eyes", [30, 20, 60, 40]), ("cat eyes", [90, 20, 120, 40])],
    )
    rows = [lab.sample("cat", Q, "cat", image=sha), lab.sample("lost", Q, "cat", image=sha)]
    table = lab.chains(
        rows,
        [
            [("a dog", 3, "No."), ("a fox", 6, "Closer."), ("a cat", 10, "Yes.")],
            [("a dog", 3, "No."), ("a cat", 10, "Yes.")],
        ],
    )
    turns = turns_of(table)
    turns[0][0].update(keyword="long whiskers", reflection="I was wrong.")
    turns[0][1].update(keyword="cat eyes", reflection="I was closer.")
    turns[1][0].update(keyword="blue sky", reflection="I was wrong.")
    table = with_chains(table, turns, [None, None])
    stage = GroundAndMark(f"boxes:{lab.root}", colors=["red"], mark_types=["point"], seed=3)
    result = stage.run(table, lab.ctx())
    marked, lost = turns_of(result.kept)
    assert issues_of(result.kept) == [None, "grounding: nothing located for 'blue sky' (turn 1)"]
    assert (marked[0]["color"], marked[0]["mark_type"], marked[0]["marks"], marked[1]["marks"]) == (
        "red",
        "point",
        1,
        2,
    )
    assert "a red point" in marked[0]["think"] or "the red point" in marked[0]["think"]
    assert "red points" in marked[1]["think"] and marked[1]["think"].startswith("I was closer.")
    assert marked[2]["marked_image"] is None
    image = Image.open(io.BytesIO(lab.store.read(marked[0]["marked_image"]))).convert("RGB")
    assert image.getpixel((80, 90)) == rgb("red")  # the point on the whiskers' box centre
    assert hashlib.sha256(lab.store.read(marked[0]["marked_image"])).hexdigest() == marked[0]["marked_image"]
    assert result.components == {"grounding": f"boxes:{lab.root}", "captions": "template-v1"}
    assert result.counts["chains"] == 1
    [caption, *_] = [d for d in result.decisions if d.check == "grounding.caption.v1"]
    assert caption.verdict == "ok" and caption.detail["by"] == "template-v1"
    again = stage.run(table, lab.ctx())
    assert turns_of(again.kept)[0][0]["marked_image"] == marked[0]["marked_image"]  # seeded, deterministic


def test_a_charts_marks_are_placed_by_the_ground_truth_its_words_are_not(lab) -> None:
    """Issue 43 item 2 (002 section 4.3, Figures 9 and 11): a Chart turn's keyword is the question's
    phrase, which matches every sales bar; the grounder looks for it with the ground truth, so the
    mark lands on the 2019 bar alone, and the anchor, the caption and the ledger's reason keep no 2019.
    A General QA turn looks for its keyword alone."""
    sha = lab.image(png(size=(160, 120)))
    _regions(lab, sha, [("sales bar of 2019", [10, 20, 50, 110]), ("sales bar of 2020", [90, 60, 130, 110])])
    rows = [lab.sample("peak", "Which year had the highest sales?", "2019", domain="Chart", image=sha)]
    table = lab.chains(rows, [[("2020", 4, "That bar is not the tallest one."), ("2019", 10, "Correct.")]])
    turns = turns_of(table)
    turns[0][0].update(keyword="year highest sales", reflection="I picked the wrong bar.")
    stage = GroundAndMark(f"boxes:{lab.root}", colors=["red"], mark_types=["point"], seed=3)
    result = stage.run(with_chains(table, turns, [None]), lab.ctx())
    [turn, _] = turns_of(result.kept)[0]
    assert issues_of(result.kept) == [None] and turn["marks"] == 1
    image = Image.open(io.BytesIO(lab.store.read(turn["marked_image"]))).convert("RGB")
    assert image.getpixel((30, 65)) == rgb("red")  # the point on the 2019 bar's centre
    assert "2019" not in turn["keyword"] and "2019" not in turn["think"]
    [located] = [d for d in result.decisions if d.check == "grounding.locate.v1"]
    assert (located.detail["keyword"], located.detail["located"]) == ("year highest sales", "year highest sales 2019")
    assert located.detail["regions"] == ["sales bar of 2019"]
    assert locate_phrase("long whiskers", "General QA", ["cat"]) == "long whiskers"


def test_a_model_inserts_the_caption_and_marks_without_the_answer(lab) -> None:
    """Figure 11 by a model: the reflection with the caption and the marks worked in; a reply that
    states the answer (or drops the marks) is refused, retried once, then the chain collapses."""
    sha = lab.image(png(size=(160, 120)))
    _regions(
        lab,
        sha,
        [("long whiskers", [20, 70, 140, 110]), ("cat eyes", [30, 20, 60, 40]), ("cat eyes", [90, 20, 120, 40])],
    )
    rows = [lab.sample("good", Q, "cat", image=sha), lab.sample("leaky", Q, "cat", image=sha)]
    table = lab.chains(rows, [[("a dog", 3, "No."), ("a cat", 10, "Yes.")]] * 2)
    turns = turns_of(table)
    turns[0][0].update(keyword="long whiskers", reflection="I was wrong about the animal.")
    turns[1][0].update(keyword="cat eyes", reflection="I was wrong about what this is.")
    inserter = lab.model(
        "inserter",
        [
            {
                "when_all": [
                    "Reflection: I was wrong about the animal.",
                    "Marks: a red point",
                    "Caption: long whiskers",
                ],
                "answer": "I was wrong about the animal; the long whiskers, marked by a red point in the image, tell me more.",
            },
            # states the answer, then (retry) forgets the marks
            {"when_all": ["Reflection: I was wrong about what this is.", "Problem"], "answer": "x"},
            {
                "when_all": ["Reflection: I was wrong about what this is.", "Your reply could not be used"],
                "answer": "I was wrong about what this is; the cat eyes tell me more.",
            },
            {
                "when_all": ["Reflection: I was wrong about what this is."],
                "answer": "I was wrong about what this is: it is a cat, see the cat eyes shown by red points in the image.",
            },
        ],
    )
    stage = GroundAndMark(f"boxes:{lab.root}", colors=["red"], mark_types=["point"], seed=3, captions=inserter)
    result = stage.run(with_chains(table, turns, [None, None]), lab.ctx())
    good, leaky = turns_of(result.kept)
    assert good[0]["think"] == (
        "I was wrong about the animal; the long whiskers, marked by a red point in the image, tell me more."
    )
    assert issues_of(result.kept) == [None, "grounding: caption insertion unusable (turn 1)"]
    assert leaky[0]["think"] is None
    rows_by = {d.sample_id: d for d in result.decisions if d.check == "grounding.caption.v1"}
    ok, refused = rows_by[rows[0]["sample_id"]], rows_by[rows[1]["sample_id"]]
    assert (ok.verdict, ok.model, ok.detail["by"]) == ("ok", "inserter", "llm:inserter")
    assert ok.detail["answer_mentions"] == {"reflection": 0, "caption": 0, "text": 0}
    assert (
        refused.verdict == "unusable" and len(refused.detail["raw"]) == 2 and "it is a cat" in refused.detail["raw"][0]
    )
    assert result.components["captions"] == "llm:inserter" and result.counts["captions_unusable"] == 1


def test_the_caption_goes_into_the_feedback_before_the_first_person_rewrite(lab) -> None:
    """Issue 32 item 20, the paper's order (002 Figure 11, then Figure 12): the caption and the
    marks are inserted into the teacher's feedback, and the rewriter turns that text into the
    first person; a rewrite that drops the marks is unusable and the chain collapses."""
    sha = lab.image(png(size=(160, 120)))
    _regions(lab, sha, [("long whiskers", [20, 70, 140, 110])])
    rows = [lab.sample("good", Q, "cat", image=sha), lab.sample("lossy", Q, "cat", image=sha)]
    table = lab.chains(
        rows,
        [
            [("a dog", 3, "Not a dog. Look at the face."), ("a cat", 10, "Yes.")],
            [("a fox", 3, "Not a fox either. Look at the face."), ("a cat", 10, "Yes.")],
        ],
    )
    turns = turns_of(table)
    for sample_turns in turns:
        sample_turns[0].update(keyword="long whiskers")  # no reflection yet: the rewrite comes after the caption
    inserter = lab.model(
        "inserter",
        [
            {
                "when_all": ["Feedback: Not a dog. Look at the face.", "Marks: a red point", "Caption: long whiskers"],
                "answer": "Not a dog. Look at the face, the long whiskers marked by a red point in the image.",
            },
            {
                "when_all": ["Feedback: Not a fox either. Look at the face."],
                "answer": "Not a fox either. Look at the face, the long whiskers marked by a red point in the image.",
            },
        ],
    )
    rewriter = lab.model(
        "rewriter",
        [
            {
                "when_all": ["Not a dog. Look at the face, the long whiskers marked by a red point in the image."],
                "answer": "Wait, I think it is not a dog. I should look at the face, the long whiskers marked by a red "
                "point in the image.",
            },
            {
                "when_all": ["Not a fox either."],
                "answer": "I think it is not a fox either. I should look at the face again.",
            },
        ],
    )
    stage = GroundAndMark(
        f"boxes:{lab.root}", colors=["red"], mark_types=["point"], seed=3, captions=inserter, rewriter=rewriter
    )
    result = stage.run(with_chains(table, turns, [None, None]), lab.ctx())
    good, lossy = turns_of(result.kept)
    assert (
        good[0]["think"]
        == good[0]["reflection"]
        == (
            "Wait, I think it is not a dog. I should look at the face, "
            "the long whiskers marked by a red point in the image."
        )
    )
    assert issues_of(result.kept) == [None, "grounding: rewrite unusable (turn 1)"]
    [caption, _] = [d for d in result.decisions if d.check == "grounding.caption.v1"]
    assert caption.detail["into"] == "feedback"
    rewrites = {d.sample_id: d for d in result.decisions if d.check == "grounding.rewrite.v1"}
    assert rewrites[rows[0]["sample_id"]].detail["feedback"].endswith("marked by a red point in the image.")
    assert (rewrites[rows[1]["sample_id"]].verdict, lab.calls("rewriter")["calls"]) == ("unusable", 3)
    assert result.components["rewriter"] == "rewriter" and result.counts["rewrites_unusable"] == 1


def test_the_template_caption_goes_into_the_feedback_in_the_teachers_voice(lab) -> None:
    sha = lab.image(png(size=(160, 120)))
    _regions(lab, sha, [("long whiskers", [20, 70, 140, 110])])
    table = lab.chains([lab.sample("cat", Q, "cat", image=sha)], [[("a dog", 3, "Not a dog."), ("a cat", 10, "Yes.")]])
    turns = turns_of(table)
    turns[0][0].update(keyword="long whiskers")
    rewriter = lab.model(
        "rewriter",
        [
            {
                "when_all": ["Not a dog."],
                "answer": "I see now it is not a dog; the long whiskers by the red point matter.",
            }
        ],
    )
    stage = GroundAndMark(f"boxes:{lab.root}", colors=["red"], mark_types=["point"], seed=3, rewriter=rewriter)
    result = stage.run(with_chains(table, turns, [None]), lab.ctx())
    [caption] = [d for d in result.decisions if d.check == "grounding.caption.v1"]
    assert caption.detail["text"].startswith("Not a dog. ") and "the long whiskers" in caption.detail["text"]
    assert not {"I", "my"} & set(caption.detail["text"].replace(",", " ").split())  # the teacher's voice
    assert turns_of(result.kept)[0][0]["think"].startswith("I see now it is not a dog")
