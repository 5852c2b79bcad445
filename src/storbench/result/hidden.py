"""Secrets this process holds (an S3 secret key), kept out of everything stored or shown
of a run: fio echoes its options in its JSON, the secret key among them, and a job file
or an error may quote it. The store passes every text it writes through ``hide``."""

from __future__ import annotations

HIDDEN = "(hidden)"
_SECRETS: set[str] = set()


class Secret(str):
    """A secret key: itself to the code that signs with it, hidden from repr and str."""

    def __repr__(self) -> str:
        return HIDDEN

    def __str__(self) -> str:
        return HIDDEN

    def __format__(self, spec: str) -> str:  # f"{secret}" too
        return HIDDEN

    @property
    def value(self) -> str:
        return str.__str__(self)


def keep_secret(value: str) -> Secret:
    """``value`` as a Secret, hidden from every text ``hide`` sees from now on."""
    if len(value) >= 4:  # a shorter one would hide harmless text (it is no key either)
        _SECRETS.add(value)
    return Secret(value)


def hide(text: str) -> str:
    """``text`` with every secret this process holds replaced by ``(hidden)``."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return text
