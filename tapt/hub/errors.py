"""The two ways a push ends without publishing anything."""

from __future__ import annotations


class PushRefused(ValueError):
    """tapt refused to push before contacting the Hub: the message names the folder or file
    and what is wrong with it (``tapt push`` exits with code 2)."""


class PushFailed(RuntimeError):
    """The Hub did not take the upload, after the retries: the message names the repository
    and the file(s). Nothing was committed by the failed step and the local folder is as it
    was (``tapt push`` exits with code 1)."""

    def __init__(self, message: str, *, repo_id: str, files: list[str]) -> None:
        super().__init__(message)
        self.repo_id = repo_id
        self.files = files
