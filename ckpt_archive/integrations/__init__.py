"""Integrations of the archive with agent frameworks (each behind its own optional extra)."""
