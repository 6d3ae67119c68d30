"""surge package."""
