"""lmms-eval's own task objects over an exported task folder: the numbers its aggregations
compute from given answers, as an lmms-eval run would (``process_results`` per document,
then each metric's aggregation over the task's records)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def harness_tasks(include: Path, group: str) -> dict[str, Any]:
    """The group's task objects by name, loaded by lmms-eval's task manager as the chat model
    uses them (``doc_to_messages``)."""
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(include), include_defaults=False)
    assert group in manager.all_groups, manager.all_groups
    return {task.config.task: task for task in _leaves(get_task_dict([group], manager, task_type="chat"))}


def _leaves(tree: dict) -> list:
    out = []
    for value in tree.values():
        out += _leaves(value) if isinstance(value, dict) else [value]
    return out


def harness_numbers(include: Path, group: str, answer: Callable[[str, dict], str]) -> dict[str, dict[str, Any]]:
    """Per task, every metric's value over its documents, ``answer(task, doc)`` being the reply."""
    out = {}
    for name, task in harness_tasks(include, group).items():
        records: dict[str, list] = {}
        for doc in task.test_docs():
            for metric, value in task.process_results(doc, [answer(name, doc)]).items():
                records.setdefault(metric, []).append(value)
        out[name] = {metric: aggregate(records[metric]) for metric, aggregate in task.aggregation().items()}
    return out
