"""hypernet package."""
