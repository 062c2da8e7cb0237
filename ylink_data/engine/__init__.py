"""Running pipelines: planning, Ray tasks, resume, accounting and publishing."""
