"""The semantic conflict checks on crafted merges: branch A is already on the base branch,
branch B merges on top of it without a textual conflict (`git merge-file` says so), and
the combined code is broken in ways each branch alone was not. Nearby changes that are
fine must stay quiet, and so must issues the base branch already had."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from textwrap import dedent

import pytest

from app.workspaces.repo.semantic.analysis import analyse_merge
from app.workspaces.repo.semantic.model import (
    SemanticCheck,
    SemanticConfig,
    SemanticIssue,
    SkipReason,
)
from app.workspaces.repo.semantic.modules import module_names

Files = Mapping[str, str | None]  # path -> text; None: the branch deleted the file


def src(text: str) -> str:
    return dedent(text).lstrip("\n")


def merge(base: Files, a: Files, b: Files) -> tuple[dict[str, str], dict[str, str]]:
    """The base branch before merging B (base + A) and after. A file both branches changed
    is merged three ways by git, which must find no textual conflict."""
    before = {p: t for p, t in {**base, **a}.items() if t is not None}
    after = dict(before)
    for path, theirs in b.items():
        ours, original = before.get(path), base.get(path)
        if theirs is None:
            after.pop(path, None)
        elif path in a and ours is not None and original is not None:
            after[path] = _merge_file(ours, original, theirs)
        else:
            after[path] = theirs
    return before, after


def _merge_file(ours: str, base: str, theirs: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        names = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            (Path(folder) / name).write_text(text)
            names.append(str(Path(folder) / name))
        done = subprocess.run(
            ["git", "merge-file", "-p", *names], capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, f"textual conflict:\n{done.stdout}"
    return done.stdout


def issues(
    base: Files, a: Files, b: Files, config: SemanticConfig | None = None
) -> list[SemanticIssue]:
    before, after = merge(base, a, b)
    return list(analyse_merge(before, after, config).issues)


def found(base: Files, a: Files, b: Files) -> list[tuple[str, str, int, str]]:
    return [(i.check, i.path, i.line, i.name) for i in issues(base, a, b)]


UTIL = src("""
    def parse(text):
        return text.split()
    """)
APP = src("""
    from util import parse


    def main(text):
        return parse(text)
    """)

RENAMED = {
    "util.py": src("""
        def parse_words(text):
            return text.split()
        """),
    "app.py": src("""
        from util import parse_words


        def main(text):
            return parse_words(text)
        """),
}


# 1. Missing references


def test_a_renames_a_function_b_imports_the_old_name() -> None:
    base = {"util.py": UTIL, "app.py": APP}
    report = {"report.py": "from util import parse\n\nWORDS = parse('a b')\n"}
    assert found(base, RENAMED, report) == [
        ("missing_reference", "report.py", 1, "util.parse"),
    ]


def test_a_renames_a_function_b_calls_it_through_the_module() -> None:
    base = {"util.py": UTIL, "app.py": APP}
    report = {"report.py": "import util\n\n\ndef words(s):\n    return util.parse(s)\n"}
    [issue] = issues(base, RENAMED, report)
    assert (issue.check, issue.path, issue.line, issue.name) == (
        "missing_reference",
        "report.py",
        5,
        "util.parse",
    )
    assert "`util` (util.py) does not define `parse`" in issue.message


def test_b_renames_a_function_a_added_a_caller_in_a_file_b_never_touched() -> None:
    base = {"util.py": UTIL, "app.py": APP}
    a = {"report.py": "from util import parse\n\nWORDS = parse('a b')\n"}
    assert found(base, a, RENAMED) == [("missing_reference", "report.py", 1, "util.parse")]


def test_a_rename_done_consistently_is_no_issue() -> None:
    base = {"util.py": UTIL, "app.py": APP}
    assert found(base, {}, RENAMED) == []


def test_a_removes_an_import_b_starts_using_the_name() -> None:
    base = {
        "app.py": src("""
            import json
            from os import path


            def load(name):
                return json.loads(name)


            def tidy(name):
                return name.strip()
            """)
    }
    a = {"app.py": base["app.py"].replace("from os import path\n", "")}
    b = {"app.py": base["app.py"].replace("name.strip()", "path.basename(name.strip())")}
    assert found(base, a, b) == [("missing_reference", "app.py", 9, "path")]


def test_a_deletes_a_module_b_imports_it() -> None:
    base = {"legacy.py": "def old():\n    return 1\n", "app.py": "X = 1\n"}
    b = {"app.py": "import legacy\n\nX = legacy.old()\n"}
    before, after = merge(base, {"legacy.py": None}, b)
    # without the branch's own paths, `legacy` is indistinguishable from a third-party module
    assert analyse_merge(before, after).issues == ()
    [issue] = analyse_merge(before, after, earlier_paths=base).issues
    assert (issue.check, issue.path, issue.line, issue.name) == (
        "missing_reference",
        "app.py",
        1,
        "legacy",
    )
    assert issue.message == "module `legacy` (legacy.py) no longer exists"


def test_b_deletes_a_module_a_imports_it() -> None:
    base = {"legacy.py": "def old():\n    return 1\n", "app.py": "X = 1\n"}
    a = {"app.py": "from legacy import old\n\nX = old()\n"}
    assert found(base, a, {"legacy.py": None}) == [("missing_reference", "app.py", 1, "legacy")]


def test_names_that_may_exist_are_not_reported() -> None:
    base = {"util.py": UTIL, "app.py": APP}
    b = {
        "star.py": "from util import *\n\nX = parse_words('a')\n",
        "dynamic.py": "globals()['late'] = 1\n\nprint(late)\n",
        "guarded.py": src("""
            try:
                from util import parse
            except ImportError:
                parse = None
            """),
        "local.py": src("""
            import util


            def run(util):
                return util.parse(1)


            class Words:
                SEPARATORS = (' ', ',')
                SPLIT = [s for s in SEPARATORS]
            """),
        "third_party.py": "from requests import gone\nimport os\n\nos.not_a_thing()\n",
        "patched.py": "import util\n\nutil.parse = str.split\nWORDS = util.parse('a b')\n",
    }
    assert found(base, RENAMED, b) == []


def test_a_missing_name_the_base_already_had_is_not_reported() -> None:
    base = {"app.py": "def main():\n    return undefined_helper()\n\n\nX = 1\n"}
    b = {"app.py": "def main():\n    return undefined_helper()\n\n\nX = 2\n"}
    assert found(base, {}, b) == []


# Python's scoping rules, on a file the merge added (no baseline: every issue is new)

BOUND = [
    "def f():\n    x = 1\n\n    def g():\n        return x\n\n    return g\n",  # a closure
    "def f():\n    return later\n\n\nlater = 1\n",  # bound after its use
    "def f():\n    global CONFIG\n    CONFIG = 1\n\n\ndef g():\n    return CONFIG\n",
    "class A:\n    KINDS = (1, 2)\n    SQUARES = [k * k for k in KINDS]\n",  # first iterable
    "check = lambda: (found := 1) and found\n",  # `:=` binds in the lambda
    "def f(xs):\n    if any((hit := x) for x in xs):\n        return hit\n",
    "def f():\n    try:\n        pass\n    except OSError as error:\n        return error\n",
    "def f(p):\n    match p:\n        case {'k': v, **rest}:\n            return v, rest\n",
    "def f():\n    def g():\n        nonlocal x\n        x = 1\n\n    del x\n",  # `del` binds
    "print(__file__, __name__, len([]))\n",  # module attributes and builtins
    "__all__ = ['lazy']\n\n\ndef __getattr__(name):\n    return name\n\n\nX = lazy\n",
    "import enum\n\n\n@enum.global_enum\nclass Flag(enum.IntFlag):\n    A = 1\n\n\nX = A\n",
]


@pytest.mark.parametrize("text", BOUND)
def test_names_bound_by_any_of_pythons_rules_are_not_reported(text: str) -> None:
    assert analyse_merge({}, {"new.py": text}).issues == ()


def test_a_method_does_not_see_its_class_body() -> None:
    text = "class A:\n    X = 1\n\n    def f(self):\n        return X\n"
    [issue] = analyse_merge({}, {"new.py": text}).issues
    assert (issue.check, issue.line, issue.name) == ("missing_reference", 5, "X")


# 2. Broken call sites

NOTIFY = src("""
    def send(message, channel):
        return (message, channel)
    """)


def test_a_adds_a_required_parameter_b_calls_the_old_signature() -> None:
    base = {"notify.py": "def send(message):\n    return message\n", "app.py": "X = 1\n"}
    a = {"notify.py": NOTIFY}
    b = {"app.py": "from notify import send\n\nX = send('hi')\n"}
    [issue] = issues(base, a, b)
    assert (issue.check, issue.path, issue.line, issue.name) == (
        "broken_call",
        "app.py",
        3,
        "notify.send",
    )
    assert issue.message == (
        "`send(...)` does not fit `notify.send(message, channel)`: missing `channel`"
    )


def test_a_renames_a_keyword_b_passes_the_old_one() -> None:
    base = {"net.py": "def fetch(url, timeout=10):\n    return url\n", "app.py": "X = 1\n"}
    a = {"net.py": "def fetch(url, *, timeout_s=10):\n    return url\n"}
    b = {"app.py": "import net\n\nX = net.fetch('u', timeout=3)\n"}
    [issue] = issues(base, a, b)
    assert issue.check == SemanticCheck.BROKEN_CALL
    assert issue.message.endswith("unexpected keyword argument `timeout`")


def test_b_removes_a_parameter_a_added_a_caller_that_passes_it() -> None:
    base = {"notify.py": NOTIFY, "app.py": "X = 1\n"}
    a = {"app.py": "from notify import send\n\nX = send('hi', 'general')\n"}
    b = {"notify.py": "def send(message):\n    return message\n"}
    [issue] = issues(base, a, b)
    assert (issue.path, issue.name) == ("app.py", "notify.send")
    assert "2 positional arguments given, at most 1 taken" in issue.message


@pytest.mark.parametrize(
    ("signature", "call", "problem"),
    [
        ("def f(a, /, b)", "f(a=1, b=2)", "positional-only parameter `a` passed by keyword"),
        ("def f(a, *, b)", "f(1, 2)", "2 positional arguments given, at most 1 taken"),
        ("def f(a, b=1)", "f(1, a=2)", "`a` given both by position and by keyword"),
        ("def f(a, *, b)", "f(1)", "missing `b`"),
    ],
)
def test_positional_and_keyword_only_changes(signature: str, call: str, problem: str) -> None:
    base = {"lib.py": "def f(a, b=None):\n    pass\n", "app.py": "X = 1\n"}
    a = {"lib.py": f"{signature}:\n    pass\n"}
    b = {"app.py": f"from lib import f\n\nX = {call}\n"}
    [issue] = issues(base, a, b)
    assert problem in issue.message


def test_a_class_init_and_a_classmethod_called_through_the_class() -> None:
    base = {
        "client.py": src("""
            class Client:
                def __init__(self, url):
                    self.url = url

                @classmethod
                def local(cls):
                    return cls('http://localhost')
            """),
        "app.py": "X = 1\n",
    }
    a = {
        "client.py": base["client.py"]
        .replace("(self, url)", "(self, url, token)")
        .replace("(cls)", "(cls, port)")
        .replace("cls('http://localhost')", "cls('http://localhost', '')")
    }
    b = {"app.py": "from client import Client\n\nX = Client('u')\nY = Client.local()\n"}
    assert found(base, a, b) == [
        ("broken_call", "app.py", 3, "client.Client"),
        ("broken_call", "app.py", 4, "client.Client.local"),
    ]


def test_calls_that_still_fit_or_cannot_be_known_are_not_reported() -> None:
    base = {
        "notify.py": "def send(message):\n    return message\n",
        "app.py": "X = 1\n",
    }
    a = {
        "notify.py": src("""
            def send(message, channel='general'):
                return message


            def log(*args, **kwargs):
                return args


            class Sender:
                def push(self, message, channel):
                    return message
            """)
    }
    b = {
        "app.py": src("""
            import notify
            from notify import Sender, send

            ARGS = ('hi',)
            X = send('hi')
            Y = notify.log(1, 2, level=3)
            Z = send(*ARGS)
            W = Sender().push('hi')
            """)
    }
    assert found(base, a, b) == []


# 3. Duplicate top-level definitions


def test_both_branches_add_the_same_helper() -> None:
    base = {"text.py": "import re\n\n\ndef title(s):\n    return s.title()\n"}
    helper = "def slugify(s):\n    return s.lower()\n"
    a = {"text.py": base["text.py"] + "\n\n" + helper}
    b = {"text.py": base["text.py"].replace("import re\n", "import re\n\n\n" + helper)}
    [issue] = issues(base, a, b)
    assert (issue.check, issue.path, issue.line, issue.name) == (
        "duplicate_definition",
        "text.py",
        12,
        "slugify",
    )
    assert "the definition on line 4 is replaced" in issue.message


def test_overloads_accessors_and_alternates_are_not_duplicates() -> None:
    base = {"shapes.py": "X = 1\n"}
    b = {
        "shapes.py": src("""
            from typing import TYPE_CHECKING, overload

            if TYPE_CHECKING:
                def area(x: int) -> int: ...
            else:
                def area(x): return x


            @overload
            def scale(x: int) -> int: ...
            @overload
            def scale(x: str) -> str: ...
            def scale(x): return x


            class Box:
                @property
                def size(self): return 1

                @size.setter
                def size(self, value): pass
            """)
    }
    assert found(base, {}, b) == []


def test_a_duplicate_the_base_already_had_is_not_reported() -> None:
    base = {"text.py": "def f():\n    pass\n\n\ndef f():\n    pass\n\n\nX = 1\n"}
    b = {"text.py": base["text.py"].replace("X = 1", "X = 2")}
    assert found(base, {}, b) == []


def test_a_method_defined_twice_in_a_class() -> None:
    base = {"box.py": "class Box:\n    def a(self):\n        pass\n"}
    a = {"box.py": base["box.py"] + "\n    def size(self):\n        return 1\n"}
    b = {
        "box.py": base["box.py"].replace(
            "class Box:\n", "class Box:\n    def size(self):\n        return 2\n\n"
        )
    }
    assert found(base, a, b) == [("duplicate_definition", "box.py", 8, "Box.size")]


# 4. Conflicting imports


def test_one_name_imported_from_two_modules() -> None:
    base = {"app.py": "import os\n\n\ndef main():\n    return os.getcwd()\n"}
    a = {"app.py": base["app.py"] + "\n\nfrom json import loads\n"}
    b = {"app.py": "from orjson import loads\n" + base["app.py"]}
    [issue] = issues(base, a, b)
    assert (issue.check, issue.line, issue.name) == ("conflicting_import", 9, "loads")
    assert issue.message.startswith("`loads` is imported from `json.loads` here and from `orjson")


def test_a_module_and_a_name_of_the_same_name() -> None:
    base = {"app.py": "X = 1\n"}
    b = {"app.py": "import path\nfrom os import path\n\nX = path\n"}
    assert found(base, {}, b) == [("conflicting_import", "app.py", 2, "path")]


def test_the_same_import_twice_is_no_conflict() -> None:
    base = {"app.py": "import os\n\n\ndef main():\n    return os.getcwd()\n"}
    a = {"app.py": base["app.py"] + "\n\nfrom json import loads\n"}
    b = {"app.py": "from json import loads\nimport os.path\n" + base["app.py"]}
    assert found(base, a, b) == []


# Limits and files that do not parse


def test_a_syntax_error_in_the_merged_file_is_an_issue_and_a_skip() -> None:
    base = {"app.py": "X = 1\n"}
    before, after = merge(base, {}, {"app.py": "X = (1\n"})
    report = analyse_merge(before, after)
    [issue] = report.issues
    assert (issue.check, issue.path, issue.line) == ("syntax_error", "app.py", 1)
    assert [(s.path, s.reason) for s in report.skipped] == [("app.py", SkipReason.SYNTAX_ERROR)]


def test_a_syntax_error_the_base_had_is_skipped_not_reported() -> None:
    before, after = merge({"app.py": "X = (\n"}, {}, {"app.py": "X = (\nY = 1\n"})
    report = analyse_merge(before, after)
    assert report.issues == ()
    assert [s.reason for s in report.skipped] == [SkipReason.SYNTAX_ERROR]


def test_a_file_fixed_by_the_merge_has_no_baseline() -> None:
    before, after = merge({"app.py": "X = (\n"}, {}, {"app.py": "X = 1\n"})
    report = analyse_merge(before, after)
    assert [s.reason for s in report.skipped] == [SkipReason.BASE_SYNTAX_ERROR]


def test_files_past_the_limits_are_skipped_and_said_so() -> None:
    base = {"a.py": "A = 1\n", "b.py": "B = 1\n", "big.py": "C = 1\n"}
    b = {"a.py": "A = 2\n", "b.py": "B = 2\n", "big.py": "C = '" + "x" * 100 + "'\n"}
    before, after = merge(base, {}, b)
    report = analyse_merge(before, after, SemanticConfig(max_files=1, max_file_bytes=50))
    assert report.analysed == ("a.py",)
    assert [(s.path, s.reason) for s in report.skipped] == [
        ("big.py", SkipReason.TOO_LARGE),
        ("b.py", SkipReason.TOO_MANY_FILES),
    ]


def test_a_skipped_module_is_unknown_so_nothing_is_reported_about_it() -> None:
    base = {"util.py": UTIL, "app.py": APP}
    report = {"report.py": "from util import parse\n"}
    assert issues(base, RENAMED, report, SemanticConfig(max_files=1)) == []


def test_importers_are_read_only_when_a_module_loses_or_changes_a_name() -> None:
    base = {
        "pkg/__init__.py": "",
        "pkg/model.py": "class Model:\n    def save(self):\n        pass\n",
        "pkg/app.py": "from pkg import model\n\nX = model.Model\n",
        "notes.py": "# says the word model, imports nothing\nNOTE = 'model'\n",
    }
    grown = (
        "class Model:\n    def save(self):\n        return 1\n\n    def load(self):\n        pass\n"
    )
    before, after = merge(base, {}, {"pkg/model.py": grown})
    assert analyse_merge(before, after).analysed == ("pkg/model.py",)
    renamed = "class Model:\n    def store(self):\n        pass\n"
    before, after = merge(base, {}, {"pkg/model.py": renamed})
    assert analyse_merge(before, after).analysed == ("pkg/model.py", "pkg/app.py")


def test_module_names_from_paths() -> None:
    roots = ("src",)
    assert module_names("pkg/mod.py", roots) == (["pkg.mod"], False)
    assert module_names("pkg/__init__.py", roots) == (["pkg"], True)
    assert module_names("src/pkg/mod.py", roots) == (["src.pkg.mod", "pkg.mod"], False)
    assert module_names("my-scripts/run.py", roots) == ([], False)


def test_relative_imports_resolve_inside_a_source_root() -> None:
    base = {
        "src/pkg/__init__.py": "",
        "src/pkg/util.py": UTIL,
        "src/pkg/app.py": "from .util import parse\n",
    }
    a = {"src/pkg/util.py": RENAMED["util.py"], "src/pkg/app.py": "from .util import parse_words\n"}
    b = {"src/pkg/cli.py": "from . import util\n\nX = util.parse('a')\n"}
    assert found(base, a, b) == [("missing_reference", "src/pkg/cli.py", 3, "pkg.util.parse")]
