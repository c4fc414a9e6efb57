from slugify import slugify


def test_single_word():
    assert slugify("Hello") == "hello"


def test_spaces_become_hyphens():
    assert slugify("Hello World") == "hello-world"


def test_runs_of_separators_collapse():
    assert slugify("Hello,   World!") == "hello-world"


def test_no_hyphens_at_the_ends():
    assert slugify("  --Draft: v2--  ") == "draft-v2"
