"""ReflectV's Great Expectations suite: the turn-format validator's rules, rho, and the
dialogues' scores and fates."""

from __future__ import annotations

import great_expectations.expectations as gxe

from mmcurate.annotation.reflectv.formatting import MULTI, SINGLE
from mmcurate.annotation.reflectv.turns import RULES as TURN_RULES
from mmcurate.core.domains import DOMAINS

from ..kind import FrameCheck, WrittenRelease
from ..validation import columns_rule, sample_rules
from . import frames as rf
from .schema import FATES


def reflectv_checks(release: WrittenRelease) -> tuple[list[FrameCheck], list[str]]:
    """The turn-format validator's rules as expectations (``turns_breaking_<rule>`` = 0), plus
    the share of multi-turn chains against rho, the dialogues' scores, and the training
    export: one record per trajectory in both layouts, roles alternating, every image a file."""
    trajectories = release.table("trajectories")
    section = release.manifest.config.get("reflectv") or {}
    frame = rf.trajectory_frame(trajectories)
    rho = float(section.get("rho", 0.75))
    # a release made before the switch reached rho by dropping surplus QA pairs too
    rho_rule = section.get("rho_rule", "collapse_or_drop")
    rules = [
        *sample_rules(trajectories.column_names, rf.TRAJECTORY_DERIVED, ("question_chars", "n_answers")),
        gxe.ExpectColumnValuesToBeInSet(column="format", value_set=[MULTI, SINGLE]),
        gxe.ExpectColumnValuesToBeInSet(column="domain", value_set=list(DOMAINS)),
        gxe.ExpectColumnValuesToBeBetween(column="n_turns", min_value=1),
        gxe.ExpectColumnValuesToBeInSet(column="turns_match_format", value_set=[True]),
        gxe.ExpectColumnValuesToBeInSet(column="first_turn_original", value_set=[True]),
        gxe.ExpectColumnValuesToBeInSet(column="depth_is_reflective_rounds", value_set=[True]),
        *(
            gxe.ExpectColumnValuesToBeBetween(column=f"turns_breaking_{rule}", min_value=0, max_value=0)
            for rule in TURN_RULES
        ),
    ]
    dialogues = release.table("dialogues")
    export = (
        [
            FrameCheck(
                "sft",
                rf.sft_frame(release.path, trajectories),
                "id",
                [
                    gxe.ExpectColumnValuesToBeInSet(column="defects", value_set=[""]),
                    gxe.ExpectColumnValuesToBeInSet(column="in_release", value_set=[True]),
                    gxe.ExpectTableRowCountToEqual(value=trajectories.num_rows),
                ],
            )
        ]
        if (release.path / "sft").is_dir()
        else []
    )
    return [
        *export,
        FrameCheck("trajectories", frame, "sample_id", rules),
        FrameCheck(
            "composition",
            rf.composition_frame(trajectories, rho, rho_rule),
            None,
            [gxe.ExpectColumnValuesToBeInSet(column="meets_rho", value_set=[True])],
        ),
        FrameCheck(
            "dialogues",
            rf.dialogue_frame(dialogues),
            "sample_id",
            [
                columns_rule(dialogues.column_names, rf.DIALOGUE_DERIVED),
                gxe.ExpectColumnValuesToBeUnique(column="sample_id"),
                gxe.ExpectColumnValuesToBeInSet(column="fate", value_set=list(FATES)),
                gxe.ExpectColumnValuesToBeInSet(column="n_scores_match_turns", value_set=[True]),
                gxe.ExpectColumnValuesToBeInSet(column="trajectory_matches_turns", value_set=[True]),
                gxe.ExpectColumnValuesToBeBetween(column="min_score", min_value=0, max_value=10),
                gxe.ExpectColumnValuesToBeBetween(column="max_score", min_value=0, max_value=10),
                gxe.ExpectColumnValuesToBeInSet(column="images_decode", value_set=[True]),
            ],
        ),
    ], []
