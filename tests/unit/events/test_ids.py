"""Call ids and the parts read back from them."""

from __future__ import annotations

import pytest

from eddies.engine.scopes import scope_part
from eddies.events.ids import call_id, run_of_call, scope_of_call, session_of_call


@pytest.mark.parametrize("session", ["s1", "team/alice #1", "a/b@i1c0x", "x:y"])
@pytest.mark.parametrize("scope", [(), (scope_part("critic", 1, "c0"),),
                                   (scope_part("travel", 2, "c1"), scope_part("general-purpose", 1, "c3"))])
def test_the_session_scope_and_run_of_a_call_id_are_read_back(session: str, scope: tuple[str, ...]) -> None:
    cid = call_id(session, scope, 7, 3, 2)
    assert session_of_call(cid) == session
    assert scope_of_call(cid, session) == scope
    assert run_of_call(cid) == 7
