"""Turning one episode's commands into a recipe for its whole family.

What belongs to one task instance is what the agent could only have learned from that instance:
words and numbers it first saw in the instruction or in an earlier command's output, and the
repository's file paths. Those become placeholders, the same value always the same placeholder,
so the edit pattern survives ("range(NAME)" to "range(NAME + 1)") while the particulars do not.
A placeholder is named for the role its syntax gives it where it is first used: FILE, MODULE
(after `import`), KEY (a quoted dict key), VAR (the name a `return` gives back), LINE (a line
number), VALUE (another number), and NAME for any other name. A value that a sed substitution
writes and that is another value plus a few letters is that placeholder with those letters
("names" where the key read was "name": KEYs): how the two relate is the method, and a
placeholder of its own would hide it (one run cannot tell such a relation from chance, so the
letters are few). A second placeholder of a role is OTHER_NAME, a third THIRD_NAME, never NAME2:
a model filling in a recipe copies a placeholder's digit into the value it writes ("52" for VALUE2
where the value is 5), and NAME2 beside NAME3 is one token apart. Nor is the value an edit writes
called NEW: a model writes a plain word like that into the code as it stands. Everything else — the
commands, flags and choices the agent made without being told — is kept, because that is the
method. So is a method of Python's own types called as one (`.upper()`), though the task's code shows
it: that is the language, and `.OTHER_NAME()` in a recipe is a call no model can fill in.

Common English words ("name", "right", "value") stay as they are in prose, but in a command, or
quoted in prose, one the agent was shown is as much an instance value as any other name: a
recipe that edits `"name"]` would fix only the task whose key happened to be "name".

Placeholders are bare capitals by default: written into a shell command they stay a harmless
word, where `<file>` would be a redirection.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

from skillgraft.evolve.learn.episode import Episode, Step

# While abstracting, a placeholder is a sentinel no pattern below can match inside (no digits,
# NUL-delimited); it is rendered in the chosen style only at the end.
_SENTINEL = re.compile(r"\x00([a-z]+)\x00")
_PATH = re.compile(r"(?<![\w/.\x00-])(?:[\w.-]+/)*[\w-]+\.(?:py|txt|cfg|toml|ini|json|ya?ml|md|csv|sh)\b")
_WORD = re.compile(r"(?<![\w\x00])[A-Za-z_][A-Za-z0-9_]*(?![\w\x00])")
# A number stands alone, or is a sed address ("16s/…"); never part of a name.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.\x00])\d+(?:\.\d+)?(?![0-9]|\.\d)")
# A number given as a flag's argument ("tail -n 2", "COLUMNS=150") is a choice of method.
_FLAG_BEFORE = re.compile(r"(?:(?:^|\s)--?[A-Za-z][\w-]*[ =]|=)$")
# A number that addresses a line: a sed address, "line 16", "file.py:16", "-16-" in grep output.
_LINE_AFTER = re.compile(r"^(?:,\d+)?[spdcai]\b|^[spd][/|#]")
_LINE_BEFORE = re.compile(r"(?:\b[Ll]ine |:)$")

# One sed substitution, its delimiter any character: s/PATTERN/REPLACEMENT/ with flags.
SED_SUBSTITUTION = re.compile(r"(?<![A-Za-z_])s([/|#,:])((?:\\.|(?!\1).)*)\1((?:\\.|(?!\1).)*)\1[gI0-9]*['\"]?\s")
# A quoted word in prose: the quote opens after no letter, so an apostrophe ("it's") opens none.
_QUOTATION = re.compile(r"(?<!\w)([\"'`])([^\"'`\n]+?)\1(?!\w)")
# A lower-case word run into a capitalised name that ends the word: "findWIDTH", not "camelCase".
_GLUED = re.compile(r"(?<=[a-z])(?=[A-Z][A-Z0-9_]+\b)")

STYLES = {"upper": "{NTH}{ROLE}", "angle": "<{nth}{role}>"}
_NTH = ("", "other", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
        "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth",
        "twentieth")

# Words that are method, not instance: shell and Python vocabulary a recipe must keep.
_METHOD = set(keyword.kwlist) | {
    "python", "python3", "pytest", "pip", "git", "diff", "cat", "sed", "grep", "head", "tail", "ls", "find",
    "echo", "printf", "awk", "nl", "wc", "cd", "cp", "mv", "rm", "mkdir", "touch", "true", "false", "test",
    "tests", "submit", "bash", "sh", "src", "repo", "self", "cls", "print", "len", "range", "int", "str", "float",
    "list", "dict", "set", "tuple", "bool", "open", "read", "write", "replace", "split", "join", "format",
    "import", "return", "def", "class", "assert", "main",
    "error", "errors", "failed", "passed", "FAILED", "PASSED", "ERROR", "AssertionError", "NameError",
    "TypeError", "ValueError", "KeyError", "AttributeError", "ImportError", "ModuleNotFoundError",
    "SyntaxError", "IndexError", "ZeroDivisionError", "Exception", "None", "True", "False", "utf",
    "encoding", "q", "x", "s", "n", "r", "e", "i", "v", "m", "c", "p", "g", "E", "F", "rn",
}
# Words that are prose: kept in a thought, an instance value in a command once the agent saw them.
_PROSE = {
    "name", "file", "path", "text", "line", "lines", "the", "a", "an",
    "and", "or", "not", "in", "is", "of", "to", "on", "for", "with", "fix", "code", "suite", "fails",
    "this", "that", "these", "those", "it", "its", "be", "are", "was", "were", "has", "have", "had", "do",
    "does", "did", "can", "should", "must", "will", "one", "two", "all", "any", "each", "every", "no", "only",
    "then", "than", "when", "where", "which", "who", "what", "why", "how", "there", "here", "from", "into",
    "out", "up", "down", "by", "at", "as", "but", "if", "else", "so", "too", "very", "more", "most", "less",
    "make", "makes", "run", "runs", "show", "shows", "finds", "see", "use", "uses", "used", "using",
    "again", "check", "change", "changes", "item", "items", "value", "values", "call", "calls", "loop",
    "function", "functions", "method", "module", "modules", "package", "test_", "failing", "failure", "bug",
    "wrong", "right", "correct", "instead", "first", "last", "next", "step", "steps", "done",
}
# A method of Python's own types, called as one (".upper()", ".strip\\("), is the language's vocabulary: a
# recipe that says to call .lower() instead of .upper() names the method, not an instance's value.
_BUILTIN_METHODS = {m for t in (str, bytes, list, dict, set, int, float) for m in dir(t) if not m.startswith("_")}
_METHOD_LOWER = {w.lower() for w in _METHOD}
_PROSE_LOWER = {w.lower() for w in _PROSE} - _METHOD_LOWER
# Syntax that names a value's role, looked at just before and just after it.
_MODULE_BEFORE = re.compile(r"(?:^|[\s;'\"(])(?:import|from)\s+$")
_KEY_BEFORE = re.compile(r"(?:\[|\.get\()\s*[\"']$")
_KEY_AFTER = re.compile(r"^[\"']\s*\]")
_VAR_BEFORE = re.compile(r"(?<![\w.])return\s+-?$")
_SUFFIX = re.compile(r"[a-z]{1,3}")  # what a derived value adds: a plural's "s" or "es", a past tense's "ed"
_FLAG_NAME = re.compile(r"(?:^|\s)--?(?:[\w-]*-)?$")  # "-name", "--exclude-dir": method
_QUOTED = (re.compile(r"[\"'`]$"), re.compile(r"^[\"'`]"))
_MIN_WORD = 3  # shorter words are too often generic ("id", "f") to be worth a placeholder


def _letters(n: int) -> str:
    """A number spelt in letters, a digit each ("12" -> "bc"): no digit for a pattern to match."""
    return "".join(chr(97 + int(d)) for d in str(n))


@dataclass
class Abstraction:
    """The mapping from an episode's concrete values to placeholders, built in order of use."""

    style: str = "upper"
    placeholders: dict[str, str] = field(default_factory=dict)  # concrete value -> sentinel
    first_seen: dict[str, str] = field(default_factory=dict)  # rendered placeholder -> where it was learned
    derived: dict[str, str] = field(default_factory=dict)  # concrete value -> sentinel + the letters it adds
    _shown: dict[str, str] = field(default_factory=dict)  # sentinel -> rendered placeholder
    _counts: dict[str, int] = field(default_factory=dict)

    def name(self, value: str, role: str, where: str) -> str:
        if value not in self.placeholders:
            n = self._counts.get(role, 0)
            self._counts[role] = n + 1
            sentinel = f"\x00{_letters(len(self.placeholders))}\x00"
            nth = _NTH[n] if n < len(_NTH) else "later_" + _letters(n)
            shown = STYLES[self.style].format(ROLE=role.upper(), role=role,
                                              NTH=f"{nth.upper()}_" if nth else "", nth=f"{nth}_" if nth else "")
            self.placeholders[value] = sentinel
            self._shown[sentinel] = shown
            self.first_seen[shown] = where
        return self.placeholders[value]

    @property
    def shown(self) -> set[str]:
        """The placeholders as a recipe writes them."""
        return set(self._shown.values())

    def render(self, text: str) -> str:
        return _SENTINEL.sub(lambda m: self._shown[m.group(0)], text)


def _seen_words(text: str) -> set[str]:
    words = {w for w in _WORD.findall(text) if len(w) >= _MIN_WORD and w.lower() not in _METHOD_LOWER}
    # pytest names a test after what it tests: seeing test_parse_row teaches parse_row too
    words |= {w[5:] for w in words if w.startswith("test_") and len(w) > 5 + _MIN_WORD}
    return words


def _seen_numbers(text: str) -> set[str]:
    return {n for n in _NUMBER.findall(text) if n not in ("0", "1", "-1")}


def _word_role(m: re.Match) -> str:
    before, after = m.string[: m.start()], m.string[m.end():]
    if _MODULE_BEFORE.search(before):
        return "module"
    if _KEY_BEFORE.search(before) or _KEY_AFTER.search(after):
        return "key"
    if _VAR_BEFORE.search(before):
        return "var"
    return "name"


def _derive(word: str, abstraction: Abstraction) -> str | None:
    """`word`, written by an edit, as the longest placeholder already named plus the few letters it
    adds ("names" -> KEY + "s"), remembered for the rest of the run."""
    stems = [v for v in abstraction.placeholders
             if word.startswith(v) and _SUFFIX.fullmatch(word[len(v):]) and _WORD.fullmatch(v)]
    stem = max(stems, key=len, default=None)
    if stem is None:
        return None
    abstraction.derived[word] = abstraction.placeholders[stem] + word[len(stem):]
    return abstraction.derived[word]


def _builtin_call(m: re.Match) -> bool:
    """`.upper(` or, escaped in a sed pattern, `.upper\\(`."""
    return (m.group(0) in _BUILTIN_METHODS and m.string[m.start() - 1 : m.start()] == "."
            and m.string.startswith(("(", "\\("), m.end()))


def _is_flag(m: re.Match) -> bool:
    """`-name` in `find . -name x`, but not `-total` inside a quoted sed script."""
    before = m.string[: m.start()]
    return bool(_FLAG_NAME.search(before)) and before.count("'") % 2 == 0 and before.count('"') % 2 == 0


def _quoted(m: re.Match) -> bool:
    return bool(_QUOTED[0].search(m.string[: m.start()]) and _QUOTED[1].search(m.string[m.end():]))


def abstract_text(text: str, abstraction: Abstraction, known: dict[str, str], command: bool = False) -> str:
    """Replaces, in one pass each, paths, then words and numbers the agent had been shown.
    `command` says the text is a command, where a prose word is a value like any other."""

    def path_sub(m: re.Match) -> str:
        return abstraction.name(m.group(0), "file", known.get(m.group(0), "the repository listing"))

    def word_sub(m: re.Match) -> str:
        w = m.group(0)
        if w.startswith("test_") and (w[5:] in known or w[5:] in abstraction.placeholders):
            return "test_" + abstraction.name(w[5:], "name", known.get(w[5:], "the repository"))
        if _is_flag(m) or _builtin_call(m):
            return w
        if w.lower() in _PROSE_LOWER and not (command or _quoted(m)):
            return w
        if w in abstraction.derived:
            return abstraction.derived[w]
        if (w not in abstraction.placeholders and any(a <= m.start() < b for a, b in written)
                and (derived := _derive(w, abstraction))):
            return derived
        if w in known or w in abstraction.placeholders:
            return abstraction.name(w, _word_role(m), known.get(w, "the repository"))
        return w

    def number_sub(m: re.Match) -> str:
        n = m.group(0)
        if _FLAG_BEFORE.search(m.string[: m.start()]):
            return n
        if n in known or n in abstraction.placeholders:
            after, before = m.string[m.end():], m.string[: m.start()]
            role = "line" if (_LINE_AFTER.search(after) or _LINE_BEFORE.search(before)) else "value"
            return abstraction.name(n, role, known.get(n, "the repository"))
        return n

    text = _PATH.sub(path_sub, text)
    # where a command's sed substitutions write: only there is a value derived from another
    written = [m.span(3) for m in SED_SUBSTITUTION.finditer(text + " ")] if command else []
    text = _WORD.sub(word_sub, text)
    return _NUMBER.sub(number_sub, text)


def values_in(text: str) -> set[str]:
    """The words, numbers and paths in a text that a recipe would take as an instance's values."""
    return _seen_words(text) | _seen_numbers(text) | set(_PATH.findall(text))


def abstract_steps(episode: Episode, steps: list[Step], style: str = "upper",
                   told: str = "") -> tuple[list[tuple[str, str]], Abstraction]:
    """(thought, command) pairs with instance values replaced, and the mapping used.

    A value counts as instance-specific only once it has been shown to the agent, so the
    mapping grows step by step in the order the agent learned things. A word the skill text
    `told` it is method, not instance, even where a task's output shows it too: a recipe that
    says to replace `.upper()` keeps `.upper()`, though every task's code holds it.
    """
    abstraction = Abstraction(style=style)
    method = _seen_words(told)  # words only: a number in a skill (`tail -n 2`) too often is also a task's value
    known = dict.fromkeys(values_in(episode.instruction) - method, "the task instruction")
    out: list[tuple[str, str]] = []
    for i, step in enumerate(steps, 1):
        # The command first: its syntax says best what a value is (a sed address is a line).
        command = abstract_text(step.command, abstraction, known, command=True)
        thought = abstract_text(_unglued(_first_sentence(step.thought)), abstraction, known)
        command = abstraction.render(command)
        out.append((_without_strays(abstraction.render(thought), command, abstraction.shown), command))
        for value in values_in(step.output) - method:
            known.setdefault(value, f"the output of step {i}")
    return out, abstraction


def _without_strays(thought: str, command: str, placeholders: set[str]) -> str:
    """The thought's clauses that state no number, quote nothing the command does not hold and
    name no placeholder the command only writes. What the run showed is a placeholder by now; a
    number or quoted word still literal is the model's own slip ("the test pins 0" where the
    command writes OTHER_VALUE, "the test pins 'daily'" where it writes THIRD_NAME), which a model
    following the recipe copies into its edit. A clause stating the value to write as a
    placeholder ("the test pins OTHER_VALUE") reads as that value: the edit writes the placeholder.
    And a clause naming again a placeholder the edit takes away is a slip of the same kind ("the
    constant NAME is VALUE; the test pins VALUE": the test wants what the edit removes)."""
    held = set(_NUMBER.findall(command))
    removed, written = _sed_sides(command, placeholders)

    def plain(clause: str) -> bool:
        return (set(_NUMBER.findall(clause)) <= held and all(q[1] in command for q in _QUOTATION.findall(clause))
                and not any(_names(clause, ph) for ph in written))

    kept: list[str] = []
    stated: set[str] = set()  # removed placeholders a kept clause has named
    for clause in re.split(r";\s*", thought):
        named = {ph for ph in removed if _names(clause, ph)}
        if plain(clause) and not named & stated:
            kept.append(clause)
            stated |= named
    return "; ".join(kept)


def _names(text: str, placeholder: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(placeholder)}(?!\w)", text) is not None


def _sed_sides(command: str, placeholders: set[str]) -> tuple[set[str], set[str]]:
    """The placeholders a command's sed substitutions match without writing them (take away), and
    those they write without matching them."""
    found: list[set[str]] = [set(), set()]
    for _, pattern, replacement in SED_SUBSTITUTION.findall(command + " "):
        for side, text in enumerate((pattern, replacement)):
            found[side] |= {ph for ph in placeholders if _names(text, ph)}
    return found[0] - found[1], found[1] - found[0]


def _unglued(thought: str) -> str:
    """A reply's prose with a capitalised name split from the word it was glued to ("findWIDTH",
    a slip of the model's), so that the name is seen, and abstracted, as the name it is."""
    return _GLUED.sub(" ", thought)


def _first_sentence(thought: str) -> str:
    thought = " ".join(thought.split())
    m = re.match(r"(.+?[.!?])(\s|$)", thought)
    return (m.group(1) if m else thought)[:200]
