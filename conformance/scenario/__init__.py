"""Scenarios: model (frozen, with source spans), loader, JSON schema and matching."""
