"""Write the data files of suites/examples/data_cases.yaml: 200 cases as CSV, 200 as JSONL.

Reproducible (a fixed seed, no clock): rerunning it rewrites the same bytes, so the suite's
content hash only moves when this script does. Run from the repository root:

    python scripts/make_example_data.py
"""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "suites" / "examples" / "data"
GOALS = [
    "build a treehouse",
    "paint the barn",
    "plant a vegetable garden",
    "fix the fence",
    "bake bread for the fair",
    "clean the river bank",
    "set up the market stall",
    "repair the old boat",
]
SOCIAL = ["Say hello to the team.", "Thank everyone for their help.", "Welcome the new member, {name}."]
ON_GOAL = [
    "Tell the team what we are working on today.",
    "Remind everyone of our goal.",
    "Ask who can help with the goal.",
]
NAMES = ["Ada", "Ben", "Chen", "Dee", "Eli", "Fay", "Gus", "Hana"]
EXPECT_GOAL = {"calls": [{"tool": "send_message_to_chat", "args": {"message": {"mentions_goal": True}}}]}


def rows(rng: random.Random, prefix: str, n: int) -> list[dict[str, object]]:
    out = []
    for i in range(n):
        goal = rng.choice(GOALS)
        on_goal = i % 2 == 1
        request = rng.choice(ON_GOAL if on_goal else SOCIAL).format(name=rng.choice(NAMES))
        out.append(
            {
                "id": f"{prefix}_{i:03d}",
                "goal": goal,
                "request": request,
                "tags": ["goal"] if on_goal else ["social"],
                "expect": EXPECT_GOAL if on_goal else None,
            }
        )
    return out


def main() -> None:
    rng = random.Random(25)
    OUT.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "goal", "request", "tags", "expect"])
    for r in rows(rng, "csv", 200):
        expect = json.dumps(r["expect"], separators=(",", ":")) if r["expect"] else ""
        writer.writerow([r["id"], r["goal"], r["request"], json.dumps(r["tags"]), expect])
    (OUT / "cases.csv").write_text(buf.getvalue(), encoding="utf-8", newline="")
    lines = []
    for r in rows(rng, "jsonl", 200):
        record = {"qid": r["id"], "goal": r["goal"], "prompt": r["request"], "labels": r["tags"]}
        if r["expect"]:
            record["expect"] = r["expect"]
        else:
            record["expect"] = None
        lines.append(json.dumps(record, separators=(",", ":")))
    (OUT / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")


if __name__ == "__main__":
    main()
