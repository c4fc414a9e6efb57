"""Turn titles into URL slugs."""
import re


def slugify(title: str) -> str:
    """Lower-case words joined by single hyphens, with no hyphen at either end."""
    return re.sub(r"[^a-z0-9]", "-", title.lower())
