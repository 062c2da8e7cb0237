"""Regression tests for issue 13 ("Trust"): each module reproduces one defect found by trying to break
ylink-data (concurrent runs, hostile manifests, leaked credentials, bad inputs...) and fails without
its fix."""
