"""The refinement bench's weakened skill: the fix step keeps its words and loses its command, and
the text is still a valid skill."""
from __future__ import annotations

import pytest

from bench.bench_refine import weakened
from skillgraft.evolve.learn.summarise import check_skill_text
from skillgraft.skillworld.families import SKILL_ONLY
from skillgraft.skillworld.library import for_family


@pytest.mark.parametrize("family", SKILL_ONLY)
def test_the_fix_step_loses_its_command_and_keeps_its_words(family):
    recipe = next(s for s in for_family(family) if s.name.endswith("-recipe"))
    text = weakened(recipe.text)
    assert "sed -i" in recipe.text and "sed -i" not in text
    fix = next(line for line in recipe.text.splitlines() if "sed -i" in line)
    assert fix.split(":")[0] in text  # "3. Find the line with … instead" stays
    assert check_skill_text(text, recipe.name) == text


def test_a_text_without_a_fix_command_is_refused():
    with pytest.raises(ValueError, match="no `sed -i` fix step"):
        weakened("---\nname: x\ndescription: y\n---\n\n1. Run the tests.\n")
