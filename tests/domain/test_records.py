"""`hot_record` classes are immutable where that is checked: mypy refuses an assignment to a
field, as it would for a frozen dataclass; at run time they are plain slotted dataclasses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mypy import api

from neens.domain.spans import SpanRecord


def test_mypy_refuses_to_assign_a_field_of_a_hot_record(tmp_path: Path) -> None:
    snippet = tmp_path / "assign.py"
    snippet.write_text(
        "from neens.domain.spans import SpanRecord\n"
        "def rename(record: SpanRecord) -> None:\n"
        "    record.name = 'other'\n"
    )
    out, _, status = api.run([str(snippet), "--no-incremental", "--follow-imports=silent"])
    assert status == 1
    assert 'Property "name" defined in "SpanRecord" is read-only' in out


def test_a_hot_record_is_a_slotted_dataclass_with_its_fields_in_order() -> None:
    names = [f.name for f in dataclasses.fields(SpanRecord)]
    assert names[:4] == ["trace_id", "span_id", "parent_span_id", "name"]
    assert "__slots__" in SpanRecord.__dict__
    record = SpanRecord("t", "s", None, "n", None, None, None, None, None)
    assert dataclasses.replace(record, name="m").name == "m"
