"""Bounds of prices in specs and options, free of pydantic so that ``surge --help`` can name
them without loading the spec models."""

MAX_PRICE_PER_CORE_HOUR = 1000.0
"""Largest price of one core for one hour (clouds ask a few cents)."""
