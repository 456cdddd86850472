"""User-facing errors.

Every problem caused by the user's input (a data file, a config, a model path) is raised as a
:class:`SeqlabError` whose message is one line naming the file and line, or the config key. The CLI
prints it and exits with code 2, no traceback.
"""

from __future__ import annotations


class SeqlabError(Exception):
    """Bad input. ``str(err)`` is a single line suitable for the terminal."""

    exit_code = 2

    def __init__(self, message: str, *, path: object = None, line: int | None = None, key: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f":{line}"
            where += ": "
        elif key is not None:
            where = f"config key '{key}': "
        self.path, self.line, self.key = path, line, key
        super().__init__((where + message).replace("\n", " "))
