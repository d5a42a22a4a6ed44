"""The column orders a grader may rely on, kept apart from validation so that the competition metadata
that names one (`column_order`) loads without pandas."""

from __future__ import annotations

from typing import Literal

ColumnOrder = Literal["any", "id first", "targets as listed"]
"""Which column order a grader relies on: none; the id first (a grader that reads every column
after the first as the targets); the targets in the listed order (one that pairs them with the
answers' columns by position)."""
