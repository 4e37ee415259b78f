"""Engines: ways to run a model that yield spectui Steps."""
