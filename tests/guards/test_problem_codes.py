"""The published `ProblemCode` enum lists exactly the codes the service can answer with:
a new error class whose code is missing would be refused by clients generated from the
document (their enums reject unknown values)."""

from __future__ import annotations

import importlib
import pkgutil

import app
from app.core.errors import AppError, ProblemCode
from app.http import problems


def _error_classes() -> list[type[AppError]]:
    """Every AppError subclass of the code base: each module is imported first, so a class
    defined anywhere (engine, api, store) is found."""
    for module in pkgutil.walk_packages(app.__path__, prefix="app."):
        importlib.import_module(module.name)
    found: list[type[AppError]] = []
    pending: list[type[AppError]] = [AppError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_code_the_service_answers_with_is_published() -> None:
    from_classes = {cls: cls.code for cls in _error_classes()}
    for cls, code in from_classes.items():
        assert isinstance(code, ProblemCode), f"{cls.__qualname__}.code is not a ProblemCode"
    # Codes of errors raised by the framework (an unknown route, a wrong method).
    from_http = {code for code, _ in problems._HTTP_CODES.values()} | {problems._OTHER_HTTP[0]}
    produced = set(from_classes.values()) | from_http
    assert produced == set(ProblemCode), (
        f"not published: {sorted(produced - set(ProblemCode))}; "
        f"published but never produced: {sorted(set(ProblemCode) - produced)}"
    )


def test_each_error_class_has_a_code_of_its_own() -> None:
    """Two classes sharing a code could not be told apart by a client."""
    classes = _error_classes()
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)), sorted(
        f"{cls.__qualname__}={cls.code}" for cls in classes if codes.count(cls.code) > 1
    )
