"""The child process of ``lmms_helpers``: lmms-eval's task manager loads the folder
(``--include_path``), its chat task objects (``doc_to_messages``, as the openai model asks)
give the documents, the messages and the numbers; the answer goes to a JSON file.

    python -m tests.releases.lmms_child numbers|documents INCLUDE GROUP IN.json OUT.json
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _tasks(include: str, group: str) -> dict[str, Any]:
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=include, include_defaults=False)
    assert group in manager.all_groups, manager.all_groups

    def leaves(tree: dict) -> list:
        return [t for v in tree.values() for t in (leaves(v) if isinstance(v, dict) else [v])]

    return {task.config.task: task for task in leaves(get_task_dict([group], manager, task_type="chat"))}


def numbers(tasks: dict[str, Any], replies: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, task in tasks.items():
        mine = replies.get(name) or replies["*"]
        records: dict[str, list] = {}
        for doc in task.test_docs():
            for metric, value in task.process_results(doc, [mine[doc["sample_id"]]]).items():
                records.setdefault(metric, []).append(value)
        out[name] = {metric: aggregate(records[metric]) for metric, aggregate in task.aggregation().items()}
    return out


def documents(tasks: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for name, task in tasks.items():
        rows = []
        for doc in task.test_docs():
            sent = task.doc_to_messages(doc)
            rows.append(
                {
                    "sample_id": doc["sample_id"],
                    "messages": [
                        {
                            "role": m["role"],
                            "texts": [p["text"] for p in m["content"] if p["type"] == "text"],
                            "images": [list(p["url"].size) for p in m["content"] if p["type"] == "image"],
                        }
                        for m in sent
                    ],
                    "visual": [list(image.size) for image in task.doc_to_visual(doc)],
                }
            )
        out[name] = rows
    return out


def main() -> None:
    mode, include, group, given, answer = sys.argv[1:6]
    tasks = _tasks(include, group)
    result = numbers(tasks, json.loads(open(given).read())) if mode == "numbers" else documents(tasks)
    with open(answer, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
