"""The pages' navigation, in the order the header lists it. An area adds its entry here;
`section` is what a page passes as `section` to be marked as the current one."""

from __future__ import annotations

from typing import NamedTuple


class NavEntry(NamedTuple):
    section: str
    label: str
    path: str


NAV: tuple[NavEntry, ...] = (
    NavEntry("preprod", "Pre-prod Evals", "/ui/preprod-evals"),
    NavEntry("compare", "Compare Versions", "/ui/compare"),
    NavEntry("sweeps", "Sweeps", "/ui/sweeps"),
    NavEntry("datasets", "Datasets", "/ui/datasets"),
    NavEntry("sessions", "Sessions", "/ui/sessions"),
    NavEntry("insights", "Insights", "/ui/insights"),
)
