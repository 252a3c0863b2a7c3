"""The GPU check, one call on a lent GPU machine (``gpu_check``; docs/developing.md, "The GPU check"): its pack of
what the machine lacks (``gpu_pack``), its steps with their caps (``gpu_steps``) and its targets and summary
(``gpu_summary``)."""
