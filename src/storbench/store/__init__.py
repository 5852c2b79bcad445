"""The store: every run with its environment, results, fio's raw output and what
analysis judged, immutable once finished (SQLite, embedded)."""

from storbench.store.migrations import MIGRATIONS
from storbench.store.sqlite import SCHEMA_VERSION, Store, default_db_path

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Store", "default_db_path"]
