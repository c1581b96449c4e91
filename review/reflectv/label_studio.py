"""ReflectV's blind quality check (seed 002, appendix A.2, Table 6) as a Label Studio project
(``label_studio`` holds the project folder, the import and the refusals all reviews share).

Export: the batch ``review.reflectv.trajectories.export_trajectories`` draws (the same dialogues, each
once, in its shuffled order, under its opaque id; ``key.jsonl`` stays beside it for the import)
becomes ``tasks.json``: per item only what the CSV batch shows, the question, the ground truth,
the trajectory and its images in the order it uses them; no subset, sample id or system name,
so the rating stays blind. ``trajectories.xml`` asks the paper's two scores, Logical Coherence
and Visual Validity, each a required single choice of 1 to 5, the CSV path's vocabulary.

Import: each annotation becomes the annotator's rated row and
``review.reflectv.trajectories.import_trajectory_ratings`` (with the model rater when given) writes
the ratings and Table 6 by the CSV path's rule.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from ..label_studio import (
    Annotation,
    choices_xml,
    image_xml,
    labelled_files,
    local_file,
    refuse_over_server_data,
    single_choice,
    write_project,
)
from .trajectories import (
    CRITERIA,
    ModelRater,
    TrajectoryExport,
    TrajectoryImport,
    export_trajectories,
    import_trajectory_ratings,
    read_key,
)

CONFIG = "trajectories"
SCORES = ("1", "2", "3", "4", "5")
PROMPTS = {
    "logic": "Logical coherence, 1 (very poor) to 5 (excellent): is the reasoning coherent, does each step follow "
    "from the one before, does it end at the ground truth?",
    "visual": "Visual validity, 1 (very poor) to 5 (excellent): do the reflections point at the right parts of the "
    "image, and do the marks show them?",
}


def labeling_config() -> str:
    scores = "\n".join(
        f'  <Header value="{escape(PROMPTS[c])}"/>\n  {choices_xml(c, "trajectory", SCORES)}' for c in CRITERIA
    )
    return f"""<View>
  <Header value="Question"/>
  <Text name="question" value="$question"/>
  <Header value="Ground truth"/>
  <Text name="ground_truth" value="$ground_truth"/>
  <Header value="Trajectory"/>
  <Text name="trajectory" value="$trajectory"/>
  <Header value="Images, in the order the trajectory uses them"/>
  <Repeater on="$images" indexFlag="{{{{idx}}}}">
    <View>
      <Text name="image_label_{{{{idx}}}}" value="$images[{{{{idx}}}}].label"/>
      {image_xml("image_{{idx}}", "$images[{{idx}}].image")}
    </View>
  </Repeater>
{scores}
</View>
"""


def export_project(
    release: Path | str, out: Path | str, n: int = 100, seed: int = 0, force: bool = False
) -> TrajectoryExport:
    """The blind batch (``export_trajectories``, same refusals) and its Label Studio project in ``out``."""
    out = Path(out)
    refuse_over_server_data(out, force)
    batch = export_trajectories(release, out, n=n, seed=seed, force=force)
    rows = [json.loads(line) for line in batch.jsonl.read_text(encoding="utf-8").splitlines() if line]
    tasks = [
        {
            "data": {
                "item_id": r["item_id"],
                "question": r["question"],
                "ground_truth": r["ground_truth"],
                "trajectory": r["trajectory"],
                "images": [
                    {"label": f"Image {k}", "image": local_file(name)} for k, name in enumerate(r["images"], start=1)
                ],
            }
        }
        for r in rows
    ]
    write_project(out, CONFIG, labeling_config(), tasks)
    return batch


def _row(annotation: Annotation) -> dict[str, Any]:
    return {"item_id": annotation.item, **{c: single_choice(annotation, c, SCORES) for c in CRITERIA}}


def import_project(
    batch: Path | str,
    exports: Sequence[Path | str],
    out: Path | str,
    rater: ModelRater | None = None,
    force: bool = False,
) -> TrajectoryImport:
    """Label Studio JSON exports -> ``import_trajectory_ratings`` (one JSONL file per annotator)."""
    key = read_key(batch)
    with labelled_files(exports, key.keys(), "an item of this batch", _row) as files:
        return import_trajectory_ratings(batch, files, out, rater, force)
