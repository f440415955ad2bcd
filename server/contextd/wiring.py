"""Composition root, the wiring: what the settings must satisfy beyond their own checks,
known only to other modules."""

from __future__ import annotations

from collections.abc import Iterator

from contextd.api import auth_modes
from contextd.config import Rule, Settings
from contextd.providers.embeddings import unknown_provider
from contextd.store.engine.open import database_url_error
from contextd.tls import ServerTls
from contextd.web.cors import CorsPolicy


def _cors_errors(settings: Settings) -> Iterator[str]:
    if settings.web_port >= 0:
        try:
            CorsPolicy.parse(settings.cors_origins)
        except ValueError as error:
            yield str(error)


def _database_url_errors(settings: Settings) -> Iterator[str]:
    if (error := database_url_error(settings.database_url)) is not None:
        yield error


def _embedding_errors(settings: Settings) -> Iterator[str]:
    if (error := unknown_provider(settings.embedding_provider)) is not None:
        yield error


def _tls_errors(settings: Settings) -> list[str]:
    return ServerTls.missing_files(settings.tls_cert, settings.tls_key, settings.tls_client_ca)


# The settings' rules that other modules know, checked with the settings' own.
SETTINGS_RULES: tuple[Rule, ...] = (
    auth_modes.settings_errors,
    _cors_errors,
    _database_url_errors,
    _embedding_errors,
    _tls_errors,
)
