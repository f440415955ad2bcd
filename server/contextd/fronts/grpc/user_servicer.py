"""UserService over gRPC."""

from __future__ import annotations

from dataclasses import dataclass

from contextd.app.users import UsersApp
from contextd.fronts.grpc.auth import caller_for
from contextd.fronts.grpc.types import Context
from contextd.v1 import users_pb2 as upb
from contextd.v1 import users_pb2_grpc


@dataclass(frozen=True, slots=True)
class UserServicer(users_pb2_grpc.UserServiceServicer):  # type: ignore[misc]
    _app: UsersApp

    async def DeleteUser(
        self, request: upb.DeleteUserRequest, context: Context
    ) -> upb.DeleteUserResponse:
        erased = await self._app.delete(caller_for(request.user_id), request.confirm_user_id)
        return upb.DeleteUserResponse(
            sessions=erased.sessions,
            messages=erased.messages,
            summaries=erased.summaries,
            memories=erased.memories,
            memory_history=erased.memory_history,
            event_logs=erased.event_logs,
            api_keys=erased.api_keys,
        )
