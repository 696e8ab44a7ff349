"""Reading a JSON file tapt wrote, with one error wording for every way it can be unreadable.

The standard library raises five different exceptions for a file that is not what it should
be (a folder, no permission, bytes that are not UTF-8, text that is not JSON, JSON nested
too deeply or holding a 5,000-digit number); each reader of a stored file used to catch
them itself. :func:`read_json` turns each into one line naming the file and what is wrong,
raised as the caller's own error type, so that ``tapt compare``, the preset record and the
benchmark records all say the same thing. A missing file stays a plain
:class:`FileNotFoundError`: whether that is an error, and how to say so, is the caller's.

Example::

    read_json(Path("results.json"))                     # the parsed value
    read_json(Path("cut.json"), error=PresetRecordError)  # PresetRecordError:
                                                          # cut.json: not JSON (... at line 1)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path, *, error: type[Exception] = ValueError,
              encoding: str = "utf-8") -> Any:
    """``path`` parsed as JSON; ``error("PATH: what is wrong")`` when it is not a regular
    file, cannot be read, is not text in ``encoding`` (``utf-8-sig`` also takes a BOM) or
    is not JSON. :class:`FileNotFoundError` when it does not exist."""
    try:
        irregular = path.exists() and not path.is_file()  # a folder, a FIFO that would block
    except OSError as err:  # a parent folder without permission
        raise error(f"{path}: cannot read ({err.strerror or err})") from None
    if irregular:
        raise error(f"{path}: not a regular file")
    try:
        return json.loads(path.read_text(encoding=encoding))
    except FileNotFoundError:
        raise
    except OSError as err:  # a symlink loop, no permission
        raise error(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise error(f"{path}: not valid UTF-8 (byte {err.start + 1})") from None
    except json.JSONDecodeError as err:
        raise error(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    except (RecursionError, ValueError):  # nested too deeply; a 5,000-digit number
        raise error(f"{path}: not JSON (nested too deeply or a number too long)") from None
