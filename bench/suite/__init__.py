"""The test suite measured: how long its two lanes take (``test_lanes``) and which rules its slow tests guard it still
catches, at two commits (``mutations``). Figures: docs/developing.md."""
