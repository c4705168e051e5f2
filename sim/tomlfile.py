"""Reading TOML files, applying ``--set`` overrides, and writing files atomically."""

from __future__ import annotations

import copy
import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Callable

import tomli_w

from hetune.sim.errors import ConfigError, WriteFailed


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file or raise ConfigError naming it.

    Args:
        path: the file to read.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), "", "file not found")
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), "", f"not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(str(p), "", f"cannot read ({exc.strerror})") from None


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``dotted.key=value``; the value is read as a TOML value, else as a string.

    Args:
        text: one ``--set`` argument.
    """
    if "=" not in text:
        raise ConfigError("--set", text, "expected dotted.key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError("--set", text, "expected dotted.key=value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word such as a strategy name or a path
    return key, value


def apply_overrides(data: dict[str, Any], overrides: list[str], base_dir: Path | None = None) -> dict[str, Any]:
    """Return a copy of ``data`` with every ``--set`` override applied.

    Keys ending in ``.path`` given on the command line are relative to the
    current directory (where the user typed them), so they are made absolute.

    Args:
        data: parsed TOML.
        overrides: ``dotted.key=value`` strings.
        base_dir: directory for relative ``.path`` values (default: cwd).
    """
    out = copy.deepcopy(data)
    for text in overrides:
        key, value = parse_override(text)
        if key.endswith(".path") and isinstance(value, str):
            value = str(((base_dir or Path.cwd()) / value).resolve())
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError("--set", ".".join(parts[: i + 1]), "is a value, not a table")
            node = child
        node[parts[-1]] = value
    return out


def _file_mode() -> int:
    # read once at import: os.umask can only be read by setting it, which is not thread-safe later
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


# What atomic_replace writes: text (UTF-8), bytes, or a writer given the temp file's path, for
# libraries that want a path of their own (pandas' to_parquet). Not torch.save: it names its archive
# after the file, so a random temp name would change the bytes from one save to the next.
Content = str | bytes | Callable[[Path], object]


def atomic_replace(path: str | Path, content: Content) -> None:
    """Replace ``path`` whole, so that no reader (and no kill or crash) ever leaves half a file.

    The contents go to a temp file in the same folder (so the rename cannot cross filesystems),
    with the mode a plain open() would give, are flushed to disk (fsync), and are renamed over
    ``path``. On any failure the temp file is removed and ``path`` is as it was.

    Args:
        path: destination file; its folder must exist.
        content: the full contents: a str (written as UTF-8), bytes, or a callable that writes
            the file at the temp path it is given (opening that file, not replacing it).

    Raises:
        WriteFailed: the folder, the disk or the rename refused (disk full, permission denied).
    """
    p = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise WriteFailed(str(p), exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "r+b") as fh:
            os.fchmod(fh.fileno(), _FILE_MODE)  # mkstemp creates the file 0600; give it what open() would
            if callable(content):
                content(Path(tmp))  # the writer opens the file itself (truncating it keeps the mode)
            else:
                fh.write(content.encode("utf-8") if isinstance(content, str) else content)
                fh.flush()
            os.fsync(fh.fileno())  # the same file whichever wrote it: its data is on disk before the rename
        os.replace(tmp, p)
    except OSError as exc:  # disk full, permission denied: the old file is untouched
        Path(tmp).unlink(missing_ok=True)
        raise WriteFailed(str(p), exc.strerror or str(exc)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_replace`).

    Args:
        path: destination file; its folder must exist.
        text: the full contents.
    """
    atomic_replace(path, text)


def atomic_write_toml(path: str | Path, data: dict[str, Any], header: str = "") -> None:
    """Write a mapping as TOML atomically, after an optional comment header (one '# ' per line)."""
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    atomic_write_text(path, comment + ("\n" if comment else "") + tomli_w.dumps(data))


def atomic_write_json(path: str | Path, data: Any) -> None:
    """Write JSON (sorted keys, indented) atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
