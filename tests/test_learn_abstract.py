"""Abstracting a run into a recipe: which values become placeholders, and what they are called."""
from __future__ import annotations

import pytest

from skillgraft.evolve.learn.abstract import abstract_steps
from skillgraft.evolve.learn.episode import Episode, Step

INSTRUCTION = "The test suite fails. Fix the code, not the tests."
TESTS = "COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2"


def recipe(*steps: Step) -> list[tuple[str, str]]:
    pairs, _ = abstract_steps(Episode("t", INSTRUCTION, list(steps), True), list(steps))
    return pairs


def test_a_common_word_the_run_read_in_the_code_is_a_placeholder_in_the_edit():
    # the key happens to be "name": kept literally, the recipe would only fix tasks whose key is "name"
    pairs = recipe(
        Step("Run the tests.", TESTS, "FAILED tests/test_a.py::test_tally_orders - KeyError: 'name'"),
        Step("Find tally_orders.", 'grep -rn -A 3 "def tally_orders(" .',
             './a.py:4:def tally_orders(rows):\n./a.py-5-    row = {"names": 1}\n./a.py-6-    return row["name"]'),
        Step('The function reads the key "name" but the dict has "names"; the name is wrong.',
             "sed -i '/def tally_orders(/,/^$/s/\"name\"]/\"names\"]/' ./a.py", ""),
    )
    thought, command = pairs[2]
    # the key written is the key read plus an "s": the recipe says so, rather than naming it apart
    assert command == "sed -i '/def NAME(/,/^$/s/\"KEY\"]/\"KEYs\"]/' FILE"
    # unquoted in prose "name" is just English
    assert thought == 'The function reads the key "KEY" but the dict has "KEYs"; the name is wrong.'


@pytest.mark.parametrize("failure, find, edit, want", [
    pytest.param(  # argument names that are English words are placeholders in a command
        "FAILED tests/test_a.py::test_score - assert 3 == 1",
        ("Find score.", 'grep -rn -A 3 "def score(" .', "./a.py:4:def score(left, right):\n./a.py-5-    return weight(right, left)"),
        ("Swap them.", "sed -i 's/weight(right, left)/weight(left, right)/' ./a.py"),
        {2: ("Swap them.", "sed -i 's/OTHER_NAME(THIRD_NAME, FOURTH_NAME)/OTHER_NAME(FOURTH_NAME, THIRD_NAME)/' FILE")}, id="english-argument-names"),
    pytest.param(  # a negated name inside a sed script is a value, not a flag
        "FAILED tests/test_a.py::test_net_sum - assert -3 == 3",
        ("Find net_sum.", 'grep -rn -A 3 "def net_sum(" .', "./a.py:4:def net_sum(total):\n./a.py-5-    return -total"),
        ("Drop the minus.", "sed -i 's/return -total/return total/' ./a.py"),
        {2: ("Drop the minus.", "sed -i 's/return -VAR/return VAR/' FILE")}, id="negated-name-in-sed"),
    pytest.param(  # the name a `return` gives back is VAR
        "FAILED tests/test_a.py::test_count_stocks - assert None == 3",
        ("Find count_stocks.", 'grep -rn -A 3 "def count_stocks(" .',
         "./a.py:4:def count_stocks(rows):\n./a.py-5-    out = len(rows)\n./a.py-6-    return"),
        ("count_stocks returns nothing.", "sed -i '/def count_stocks(/,/^$/s/return$/return out/' ./a.py"),
        {2: ("NAME returns nothing.", "sed -i '/def NAME(/,/^$/s/return$/return VAR/' FILE")}, id="returned-var"),
    pytest.param(  # a value written as the longest value named before plus a few letters
        "FAILED tests/test_a.py::test_total - KeyError: 'price'",
        ("Find total.", 'grep -rn -A 3 "def total(" .',
         './a.py:4:def total(row):\n./a.py-5-    pri = {"prices": 1}\n./a.py-6-    return pri["price"]'),
        ("Read the plural.", "sed -i 's/pri\\[\"price\"]/pri[\"prices\"]/' ./a.py"),
        {2: ("Read the plural.", "sed -i 's/OTHER_NAME\\[\"KEY\"]/OTHER_NAME[\"KEYs\"]/' FILE")}, id="derived-from-longest"),
    pytest.param(  # a module after `import` is called MODULE, and flags stay as they are ("name" was read, -name is a flag)
        "FAILED tests/test_a.py::test_blend - NameError: name 'math' is not defined",
        ("Find the files.", "find . -name '*.py'", "./a.py\n./name.txt"),
        ("math is never imported; add import math.", "sed -i '1i import math' ./a.py"),
        {1: ("Find the files.", "find . -name '*.py'"),
         2: ("MODULE is never imported; add import MODULE.", "sed -i '1i import MODULE' FILE")}, id="module-after-import"),
    pytest.param(  # a second value of a role is named by an ordinal: no digit to copy into the edit
        "FAILED tests/test_a.py::test_LIMIT - AssertionError: assert 'green' == 'amber'",
        ("Find LIMIT.", 'grep -rn "LIMIT =" .', './a.py:4:LIMIT = "green"'),
        ('The constant LIMIT is "green".', "sed -i '/LIMIT =/,/^$/s/green/amber/' ./a.py"),
        {2: ('The constant NAME is "OTHER_NAME".', "sed -i '/NAME =/,/^$/s/OTHER_NAME/THIRD_NAME/' FILE")}, id="third-name"),
    pytest.param(  # a reason naming again the value the edit takes away says the test wants it: a slip
        "FAILED tests/test_a.py::test_LIMIT - assert 0.25 == 0.75",
        ("Find LIMIT.", 'grep -rn "LIMIT =" .', "./a.py:4:LIMIT = 0.25"),
        ("LIMIT is 0.25; the test pins 0.25.", "sed -i 's/^LIMIT = 0.25$/LIMIT = 0.75/' ./a.py"),
        {2: ("NAME is VALUE", "sed -i 's/^NAME = VALUE$/NAME = OTHER_VALUE/' FILE")}, id="removed-value-again"),
    pytest.param(
        "FAILED tests/test_a.py::test_LIMIT - assert 0.25 == 0.75",
        ("Find LIMIT.", 'grep -rn "LIMIT =" .', "./a.py:4:LIMIT = 0.25"),
        ("LIMIT is 0.25; the test pins 0.75.", "sed -i 's/^LIMIT = 0.25$/LIMIT = 0.75/' ./a.py"),
        # the value the edit writes, stated as a placeholder, reads as that value: the edit wrote "OTHER_VALUE"
        {2: ("NAME is VALUE", "sed -i 's/^NAME = VALUE$/NAME = OTHER_VALUE/' FILE")}, id="other-value"),
    pytest.param(  # a number the run never showed is the reply's slip: its clause leaves the reason
        "FAILED tests/test_a.py::test_LIMIT - assert 0.25 == 0.75",
        ("Find LIMIT.", 'grep -rn "LIMIT =" .', "./a.py:4:LIMIT = 0.25"),
        ("LIMIT is 0.25; the test pins 0.", "sed -i 's/^LIMIT = 0.25$/LIMIT = 0.75/' ./a.py"),
        {2: ("NAME is VALUE", "sed -i 's/^NAME = VALUE$/NAME = OTHER_VALUE/' FILE")}, id="stray-number-in-reason"),
    pytest.param(  # a name glued to a word is still the name; a quoted word the run never showed is a slip
        "FAILED tests/test_a.py::test_LIMIT - AssertionError: assert 'south' == 'weekly'",
        ("The failing test is test_LIMIT; findLIMIT:", 'grep -rn "LIMIT =" .', './a.py:4:LIMIT = "south"'),
        ('The constantLIMIT is "south"; the test pins "daily".', "sed -i '/LIMIT =/,/^$/s/south/weekly/' ./a.py"),
        {1: ("The failing test is test_NAME; find NAME:", 'grep -rn "NAME =" .'),
         2: ('The constant NAME is "OTHER_NAME"', "sed -i '/NAME =/,/^$/s/OTHER_NAME/THIRD_NAME/' FILE")},
        id="glued-name-and-stray-quote"),
    pytest.param(  # the value kept beside a minus: the minus is the fix
        "FAILED tests/test_a.py::test_LIMIT - assert 16 == -16",
        ("Find LIMIT.", 'grep -rn "LIMIT =" .', "./a.py:4:LIMIT = 16"),
        ("Negate it.", "sed -i 's/^LIMIT = 16$/LIMIT = -16/' ./a.py"),
        {2: ("Negate it.", "sed -i 's/^NAME = VALUE$/NAME = -VALUE/' FILE")}, id="kept-number"),
])
def test_values_in_a_run_become_placeholders_and_the_rest_stays(failure, find, edit, want):
    pairs = recipe(Step("Run the tests.", TESTS, failure), Step(*find), Step(*edit, ""))
    assert {i: pairs[i] for i in want} == want


def test_what_the_skill_told_the_agent_stays_as_written_though_the_code_shows_it():
    steps = [
        Step("Run the tests.", TESTS, "FAILED tests/test_a.py::test_blend_levels - assert 'TALL' == 'tall'"),
        Step("Find blend_levels.", 'grep -rn -A 3 "def blend_levels(" .',
             "./a.py:4:def blend_levels(name):\n./a.py-5-    return name.upper().lower_first()"),
        Step("Make the skill's edit.", "sed -i '/def blend_levels(/,/^$/s/.upper()/.lower()/' ./a.py", ""),
    ]
    episode = Episode("t", INSTRUCTION, steps, True)
    told = "3. Find the line with `.upper()` and call .lower() instead."
    pairs, _ = abstract_steps(episode, steps, told=told)
    assert pairs[2][1] == "sed -i '/def NAME(/,/^$/s/.upper()/.lower()/' FILE"
    # without the skill's text, a method the code defines is only a word the run read: an instance value
    shouted = [Step(s.thought, s.command.replace("upper", "shout"), s.output.replace("upper", "shout")) for s in steps]
    pairs, _ = abstract_steps(Episode("t", INSTRUCTION, shouted, True), shouted)
    assert pairs[2][1] == "sed -i '/def NAME(/,/^$/s/.OTHER_NAME()/.lower()/' FILE"


@pytest.mark.parametrize("edit", ["s/.upper()/.lower()/", "s/\\.upper\\(\\)/.lower()/", "s/.strip()/.rstrip()/"])
def test_a_method_of_pythons_own_types_is_the_language_not_a_value(edit):
    steps = [
        Step("Run the tests.", TESTS, "FAILED tests/test_a.py::test_blend_levels - assert 'TALL' == 'tall'"),
        Step("Find blend_levels.", 'grep -rn -A 3 "def blend_levels(" .',
             "./a.py:4:def blend_levels(name):\n./a.py-5-    return name.upper().strip()"),
        Step("Call .lower() instead of .upper().", f"sed -i '/def blend_levels(/,/^$/{edit}' ./a.py", ""),
    ]
    pairs, _ = abstract_steps(Episode("t", INSTRUCTION, steps, True), steps)
    assert pairs[2] == ("Call .lower() instead of .upper().", f"sed -i '/def NAME(/,/^$/{edit}' FILE")
    # the same word as a key or a function of the task's own is a value like any other
    keyed = [Step(s.thought, s.command, s.output.replace("name.upper()", 'row["upper"]')) for s in steps[:2]]
    keyed.append(Step("Read the key.", """sed -i 's/row["upper"]/row["lower"]/' ./a.py""", ""))
    pairs, _ = abstract_steps(Episode("t", INSTRUCTION, keyed, True), keyed)
    assert pairs[2][1] == """sed -i 's/OTHER_NAME["KEY"]/OTHER_NAME["lower"]/' FILE"""
