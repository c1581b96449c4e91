"""RefLVQA's Great Expectations suite: QA pairs whose every cited document is released and
whose every sentence is supported, and documents with unique ids and decodable images."""

from __future__ import annotations

import great_expectations.expectations as gxe

from .. import quality_frames as qf
from ..kind import FrameCheck, WrittenRelease
from ..validation import columns_rule, sample_rules


def reflvqa_checks(release: WrittenRelease) -> tuple[list[FrameCheck], list[str]]:
    documents = release.table("documents")
    qa = qf.qa_frame(release.table("qa"), documents)
    docs = qf.documents_frame(documents)
    kb = qf.documents_frame(release.table("knowledge_base"))
    checks = [
        FrameCheck(
            "qa",
            qa,
            "sample_id",
            [
                *sample_rules(qf.QA_COLUMNS, qf.QA_DERIVED, ("question_chars", "answer_chars")),
                gxe.ExpectColumnValuesToBeBetween(column="n_missing_cited_docs", min_value=0, max_value=0),
                gxe.ExpectColumnValuesToBeBetween(column="n_unsupported_sentences", min_value=0, max_value=0),
            ],
        ),
    ]
    for name, frame, columns in (("documents", docs, qf.DOCUMENT_COLUMNS), ("knowledge_base", kb, qf.KB_COLUMNS)):
        checks.append(
            FrameCheck(
                name,
                frame,
                "doc_id",
                [
                    columns_rule(columns, qf.DOCUMENT_DERIVED),
                    gxe.ExpectColumnValuesToBeUnique(column="doc_id"),
                    gxe.ExpectColumnValuesToBeInSet(column="modality", value_set=["text", "image"]),
                    gxe.ExpectColumnValuesToBeInSet(column="images_decode", value_set=[True]),
                ],
            )
        )
    return checks, []
