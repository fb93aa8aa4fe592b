"""The trajectory diff: two versions' steps on one prompt, aligned and marked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neens.domain.trajectory import Step, StepDiff, diff_trajectories


def tool(name: str, input: str | None = "{}", output: str | None = "ok") -> Step:
    return Step(kind="tool", name=name, input=input, output=output)


def llm(output: str = "thinking") -> Step:
    return Step(kind="llm", name="chat", input="prompt", output=output)


def marks(diff: list[StepDiff]) -> list[tuple[str, str]]:
    return [
        (line.status, (line.candidate or line.baseline).name)  # type: ignore[union-attr]
        for line in diff
    ]


def test_identical_trajectories_are_the_same_step_for_step() -> None:
    steps = [llm(), tool("search"), llm("answer")]

    diff = diff_trajectories(steps, list(steps))

    assert [line.status for line in diff] == ["same", "same", "same"]
    assert [(line.baseline_index, line.candidate_index) for line in diff] == [
        (0, 0),
        (1, 1),
        (2, 2),
    ]


def test_a_step_the_candidate_stopped_taking_is_removed() -> None:
    baseline = [llm(), tool("lookup_order"), llm("answer")]
    candidate = [llm(), llm("answer")]

    diff = diff_trajectories(baseline, candidate)

    assert [line.status for line in diff] == ["same", "removed", "same"]
    removed = diff[1]
    assert (removed.baseline, removed.candidate) == (tool("lookup_order"), None)
    assert (removed.baseline_index, removed.candidate_index) == (1, None)


def test_a_step_only_the_candidate_takes_is_added() -> None:
    diff = diff_trajectories([llm()], [tool("search"), llm()])

    assert marks(diff) == [("added", "search"), ("same", "chat")]
    assert (diff[0].baseline_index, diff[0].candidate_index) == (None, 0)


def test_the_same_step_with_different_content_is_changed() -> None:
    baseline = [tool("search", input='{"q": "order 1"}'), llm("it shipped")]
    candidate = [tool("search", input='{"q": "order 2"}'), llm("it shipped")]

    diff = diff_trajectories(baseline, candidate)

    assert [line.status for line in diff] == ["changed", "same"]
    assert diff[0].baseline == baseline[0]
    assert diff[0].candidate == candidate[0]


def test_a_different_output_alone_is_a_change() -> None:
    diff = diff_trajectories([llm("yes")], [llm("no")])

    assert [line.status for line in diff] == ["changed"]


def test_a_replaced_stretch_pairs_steps_in_order_and_lists_the_leftovers() -> None:
    baseline = [llm(), tool("lookup_order"), tool("refund"), llm("done")]
    candidate = [llm(), tool("guess_order"), llm("done")]

    diff = diff_trajectories(baseline, candidate)

    assert [(line.status, line.baseline_index, line.candidate_index) for line in diff] == [
        ("same", 0, 0),
        ("changed", 1, 1),
        ("removed", 2, None),
        ("same", 3, 2),
    ]
    assert (diff[1].baseline, diff[1].candidate) == (tool("lookup_order"), tool("guess_order"))


def test_a_longer_replacement_ends_with_added_steps() -> None:
    diff = diff_trajectories([tool("a")], [tool("b"), tool("c")])

    assert [(line.status, line.baseline_index, line.candidate_index) for line in diff] == [
        ("changed", 0, 0),
        ("added", None, 1),
    ]


def test_steps_are_aligned_on_kind_as_well_as_name() -> None:
    diff = diff_trajectories([Step("tool", "chat", None, None)], [Step("llm", "chat", None, None)])

    assert [line.status for line in diff] == ["changed"]
    assert diff_trajectories([tool("x")], [tool("x")])[0].status == "same"


def test_a_step_repeated_hundreds_of_times_is_still_aligned() -> None:
    # difflib's autojunk would treat a step that fills over 1% of a 200+ step sequence as noise.
    baseline = [tool("poll")] * 300 + [tool("lookup_order")]
    candidate = [tool("poll")] * 300

    diff = diff_trajectories(baseline, candidate)

    assert [line.status for line in diff] == ["same"] * 300 + ["removed"]


def test_two_empty_trajectories_have_an_empty_diff() -> None:
    assert diff_trajectories([], []) == []


def test_an_empty_baseline_makes_every_step_added() -> None:
    assert [line.status for line in diff_trajectories([], [llm(), tool("x")])] == ["added"] * 2


step_strategy = st.builds(
    Step,
    kind=st.sampled_from(["llm", "tool"]),
    name=st.sampled_from(["chat", "search", "lookup_order", "refund"]),
    input=st.sampled_from([None, "a", "b"]),
    output=st.sampled_from([None, "x", "y"]),
)


@given(st.lists(step_strategy, max_size=15), st.lists(step_strategy, max_size=15))
def test_the_diff_covers_every_step_of_both_sides_exactly_once_in_order(
    baseline: list[Step], candidate: list[Step]
) -> None:
    diff = diff_trajectories(baseline, candidate)

    b_indices = [line.baseline_index for line in diff if line.baseline_index is not None]
    c_indices = [line.candidate_index for line in diff if line.candidate_index is not None]
    assert b_indices == list(range(len(baseline)))
    assert c_indices == list(range(len(candidate)))
    for line in diff:
        assert (line.baseline is None) == (line.baseline_index is None)
        assert (line.candidate is None) == (line.candidate_index is None)
        if line.baseline_index is not None:
            assert line.baseline == baseline[line.baseline_index]
        if line.candidate_index is not None:
            assert line.candidate == candidate[line.candidate_index]
        if line.status == "removed":
            assert line.candidate is None and line.baseline is not None
        elif line.status == "added":
            assert line.baseline is None and line.candidate is not None
        else:
            assert line.baseline is not None and line.candidate is not None
            assert (line.status == "same") == (line.baseline == line.candidate)


@given(st.lists(step_strategy, max_size=15))
def test_a_trajectory_diffed_with_itself_is_all_same(steps: list[Step]) -> None:
    assert all(line.status == "same" for line in diff_trajectories(steps, list(steps)))
