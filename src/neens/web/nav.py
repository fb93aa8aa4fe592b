"""The pages' navigation, in the order the header lists it. An area adds its entry here (the
sweep pages add "Sweeps" once their list page exists); `section` is what a page passes as
`section` to be marked as the current one."""

from __future__ import annotations

from typing import NamedTuple


class NavEntry(NamedTuple):
    section: str
    label: str
    path: str


NAV: tuple[NavEntry, ...] = (
    NavEntry("preprod", "Pre-prod Evals", "/ui/preprod-evals"),
    NavEntry("compare", "Compare Versions", "/ui/compare"),
    NavEntry("datasets", "Datasets", "/ui/datasets"),
    NavEntry("sessions", "Sessions", "/ui/sessions"),
    NavEntry("insights", "Insights", "/ui/insights"),
)
