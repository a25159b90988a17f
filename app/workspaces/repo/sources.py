"""The Python files of a commit, read in one `git cat-file --batch` (not a process a
file), within limits: what the semantic checks compare before and after a merge."""

from __future__ import annotations

from dataclasses import dataclass

from app.workspaces.repo.repository import Repository


@dataclass(frozen=True)
class TreeSources:
    sources: dict[str, str]  # path -> text, the files read
    too_large: tuple[str, ...]  # left out: over the size limit
    dropped: int  # left out: past the file limit


async def python_paths(repo: Repository, rev: str) -> list[str]:
    out = await repo.git.run("ls-tree", "-r", "-z", "--name-only", rev, "--", cwd=repo.path)
    return [p for p in out.stdout.split("\0") if p.endswith(".py")]


async def python_sources(
    repo: Repository, rev: str, *, max_files: int, max_file_bytes: int
) -> TreeSources:
    out = await repo.git.run("ls-tree", "-r", "-z", "--long", rev, "--", cwd=repo.path)
    wanted: list[tuple[str, str]] = []  # (object, path)
    too_large: list[str] = []
    for record in out.stdout.split("\0"):
        meta, _, path = record.partition("\t")
        parts = meta.split()
        if not path.endswith(".py") or len(parts) != 4 or parts[1] != "blob":
            continue
        if not parts[3].isdigit() or int(parts[3]) > max_file_bytes:
            too_large.append(path)
            continue
        wanted.append((parts[2], path))
    dropped = max(0, len(wanted) - max_files)
    wanted = wanted[:max_files]
    if not wanted:
        return TreeSources({}, tuple(too_large), dropped)
    batch = "".join(f"{obj}\n" for obj, _ in wanted).encode()
    result = await repo.git.run("cat-file", "--batch", cwd=repo.path, input_bytes=batch)
    data, at, sources = result.output, 0, {}
    for _, path in wanted:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].split()[2])
        start = header_end + 1
        sources[path] = data[start : start + size].decode(errors="replace")
        at = start + size + 1  # the newline after each object
    return TreeSources(sources, tuple(too_large), dropped)
