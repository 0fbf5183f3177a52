"""The hostile-case tests (issue 27): other users, planted files, special files, huge files, nested JSON, a
frozen supervisor. Fixtures and helpers are in hostile.py."""

from safety.hostile import tmp_shared, users  # noqa: F401  (fixtures)
