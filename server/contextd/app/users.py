"""DeleteUser's use case: erase everything stored for a user."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from contextd.app.scope import Caller
from contextd.core.errors import InvalidArgument
from contextd.store.event_log.removals import LogRemovals
from contextd.store.users import Erased, UserRepo


class UsersApp:
    def __init__(
        self,
        users: UserRepo,
        removals: LogRemovals,
        stop_background_work: Callable[[str, str], None] | None = None,
    ) -> None:
        self.users = users
        self.removals = removals
        # Cancels the user's after-turn work, so that none of it writes memories again
        # once they are erased.
        self.stop_background_work = stop_background_work

    async def delete(self, caller: Caller, confirm_user_id: str) -> Erased:
        """Erase the caller's user. ``confirm_user_id`` must name that user again: an
        empty request, which means the caller, erases nothing by accident."""
        if confirm_user_id != caller.user_id:
            raise InvalidArgument.one(
                "confirm_user_id", "must repeat the id of the user being deleted"
            )
        await self.removals.sweep()  # what an erasure cut short by a crash left behind
        erased, note = await self.users.erase(caller.user_id, caller.tenant_id)
        # Right after the commit, with no await in between: work for a turn that ended
        # before it is cancelled before it can write again; work for a later turn finds
        # no session and does nothing.
        if self.stop_background_work is not None:
            self.stop_background_work(caller.tenant_id, caller.user_id)
        return replace(erased, event_logs=await self.removals.finish(note))
