"""Triage: run tags, failure clusters, HTML reports and dashboards (see docs/triage.md)."""
