"""The node states are one Literal (cockpit.fleet.records.NodeState, listed in STATES); the remote errors name
theirs as plain strings, which the fleet reads through is_node_state: each must be one of them."""

from __future__ import annotations

import inspect
import typing

from cockpit.fleet import records as report
from cockpit.remote import base


def test_states_table_lists_every_node_state():
    assert set(report.STATES) == set(typing.get_args(report.NodeState))


def test_every_remote_error_names_a_node_state():
    errors = [c for c in vars(base).values() if inspect.isclass(c) and issubclass(c, base.RemoteError)]
    assert len(errors) >= 6
    assert {c.__name__: c.state for c in errors if not report.is_node_state(c.state)} == {}
