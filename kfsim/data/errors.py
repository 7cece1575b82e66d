"""The error every data loader raises when its package is not installed."""
from __future__ import annotations


class DataUnavailable(FileNotFoundError):
    """A data set's OS package is missing; the message says what to install."""

    def __init__(self, what: str, package: str, detail: str = ""):
        self.package = package
        msg = (f"{what} is not available{': ' + detail if detail else ''}. "
               f"Install it with: sudo apt-get install -y {package}")
        super().__init__(msg)
