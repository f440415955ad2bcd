"""SessionService, MemoryService and PromptService over gRPC."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from contextd.app.memories import MemoriesApp, NamesAMemory, memory_filter
from contextd.app.prompts import PromptsApp
from contextd.app.sessions import SessionsApp
from contextd.core.content import ImageLimits
from contextd.core.errors import FailedPrecondition, InvalidArgument, Violations
from contextd.core.xml_history import XmlHistory
from contextd.fronts.grpc import convert, memory_requests, records
from contextd.fronts.grpc.auth import caller_for, caller_tenant
from contextd.fronts.grpc.convert import PublicIds, check_id, check_ids
from contextd.fronts.grpc.types import Context
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc, prompts_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb

_FORMATS = {spb.EXPORT_FORMAT_UNSPECIFIED, spb.EXPORT_FORMAT_JSONL, spb.EXPORT_FORMAT_XML}


@dataclass(frozen=True, slots=True)
class SessionServicer(sessions_pb2_grpc.SessionServiceServicer):  # type: ignore[misc]
    _app: SessionsApp
    _tokenizer: str  # the server's default: stored messages report their count under it
    _image_limits: ImageLimits
    _ids: PublicIds

    async def CreateSession(
        self, request: spb.CreateSessionRequest, context: Context
    ) -> spb.CreateSessionResponse:
        session = await self._app.create(
            caller_for(request.user_id),
            request.scenario,
            request.host,
            request.title,
            dict(request.metadata),
        )
        return spb.CreateSessionResponse(session=records.session_to_pb(session))

    async def GetSession(
        self, request: spb.GetSessionRequest, context: Context
    ) -> spb.GetSessionResponse:
        check_ids(("session_id", request.session_id))
        session = await self._app.get(caller_for(request.user_id), request.session_id)
        return spb.GetSessionResponse(session=records.session_to_pb(session))

    async def ListSessions(
        self, request: spb.ListSessionsRequest, context: Context
    ) -> spb.ListSessionsResponse:
        sessions, token = await self._app.list_sessions(
            caller_for(request.user_id), request.page_size, request.page_token
        )
        return spb.ListSessionsResponse(
            sessions=[records.session_to_pb(s) for s in sessions], next_page_token=token
        )

    async def DeleteSession(
        self, request: spb.DeleteSessionRequest, context: Context
    ) -> spb.DeleteSessionResponse:
        check_ids(("session_id", request.session_id))
        await self._app.delete(caller_for(request.user_id), request.session_id)
        return spb.DeleteSessionResponse()

    async def AppendMessages(
        self, request: spb.AppendMessagesRequest, context: Context
    ) -> spb.AppendMessagesResponse:
        caller = caller_for(request.user_id)
        violations = Violations()
        check_id(request.session_id, "session_id", violations)
        messages = convert.messages_from_pb(
            request.messages, "messages", violations, self._image_limits
        )
        violations.raise_if_any()
        stored = await self._app.append(caller, request.session_id, messages, request.turn_index)
        return spb.AppendMessagesResponse(
            messages=[records.stored_message_to_pb(m, self._tokenizer, self._ids) for m in stored]
        )

    async def ListMessages(
        self, request: spb.ListMessagesRequest, context: Context
    ) -> spb.ListMessagesResponse:
        check_ids(("session_id", request.session_id))
        messages, token = await self._app.list_messages(
            caller_for(request.user_id), request.session_id, request.page_size, request.page_token
        )
        return spb.ListMessagesResponse(
            messages=[
                records.stored_message_to_pb(m, self._tokenizer, self._ids) for m in messages
            ],
            next_page_token=token,
        )

    async def AddCompressionSummary(
        self, request: spb.AddCompressionSummaryRequest, context: Context
    ) -> spb.AddCompressionSummaryResponse:
        message_ids = request.message_ids[:]
        check_ids(
            ("session_id", request.session_id),
            *((f"message_ids[{k}]", v) for k, v in enumerate(message_ids)),
            ("start_message_id", request.start_message_id),
        )
        ids = self._ids
        row = await self._app.add_compression_summary(
            caller_for(request.user_id),
            request.session_id,
            ids.message_rows(message_ids, "message_ids"),
            ids.message_row(request.start_message_id, "start_message_id"),
            request.summary,
        )
        return spb.AddCompressionSummaryResponse(summary_id=ids.compression_summary(row.id))

    async def SetSessionSummary(
        self, request: spb.SetSessionSummaryRequest, context: Context
    ) -> spb.SetSessionSummaryResponse:
        check_ids(("session_id", request.session_id))
        await self._app.set_session_summary(
            caller_for(request.user_id), request.session_id, request.summary
        )
        return spb.SetSessionSummaryResponse()

    async def ExportEvents(
        self, request: spb.ExportEventsRequest, context: Context
    ) -> AsyncIterator[spb.ExportEventsResponse]:
        check_ids(("session_id", request.session_id))
        caller = caller_for(request.user_id)
        if request.format not in _FORMATS:
            raise InvalidArgument.one("format", f"unknown export format {request.format}")
        events = self._app.events(caller, request.session_id, request.after)
        if request.format != spb.EXPORT_FORMAT_XML:
            async for event in events:
                yield spb.ExportEventsResponse(
                    json=json.dumps(event, ensure_ascii=False, separators=(",", ":")),
                    type=str(event["type"]),
                )
            return
        if request.after:
            raise InvalidArgument.one("after", "the XML history is exported whole: leave it 0")
        history = XmlHistory(request.session_id)
        first = True
        async for event in events:
            if first:  # the session is the caller's: the document can begin
                yield spb.ExportEventsResponse(xml=history.head(), type="head")
                first = False
            for kind, piece in history.add(event):
                yield spb.ExportEventsResponse(xml=piece, type=kind)
        if first:
            yield spb.ExportEventsResponse(xml=history.head(), type="head")
        for kind, piece in history.end():
            yield spb.ExportEventsResponse(xml=piece, type=kind)

    async def EndSession(
        self, request: spb.EndSessionRequest, context: Context
    ) -> spb.EndSessionResponse:
        check_ids(("session_id", request.session_id))
        remaining = context.time_remaining()
        ended = await self._app.end_session(
            caller_for(request.user_id),
            request.session_id,
            request.mode,
            None if remaining is None else time.monotonic() + remaining,
        )
        return spb.EndSessionResponse(ended=ended)


@dataclass(frozen=True, slots=True)
class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):  # type: ignore[misc]
    _app: MemoriesApp
    _ids: PublicIds

    async def AddMemory(
        self, request: mpb.AddMemoryRequest, context: Context
    ) -> mpb.AddMemoryResponse:
        check_ids(
            ("source_session_id", request.source_session_id),
            ("source_message_id", request.source_message_id),
        )
        caller = caller_for(request.user_id)
        memory, created = await self._app.add(
            caller,
            request.content,
            request.source_session_id,
            self._ids.message_row(request.source_message_id, "source_message_id"),
            memory_requests.add_details(request),
        )
        return mpb.AddMemoryResponse(
            memory=records.memory_to_pb(memory, self._ids), created=created
        )

    async def SearchMemories(
        self, request: mpb.SearchMemoriesRequest, context: Context
    ) -> mpb.SearchMemoriesResponse:
        caller = caller_for(request.user_id)
        found_by = memory_filter(memory_requests.filter_from_pb(request.filter))
        found = await self._app.search(caller, request.query, request.limit, found_by)
        return mpb.SearchMemoriesResponse(
            results=[
                records.scored_memory_to_pb(s, self._ids, request.explain) for s in found.found
            ],
            note=found.note,
        )

    async def ListMemories(
        self, request: mpb.ListMemoriesRequest, context: Context
    ) -> mpb.ListMemoriesResponse:
        caller = caller_for(request.user_id)
        found_by = memory_filter(memory_requests.filter_from_pb(request.filter))
        memories, token = await self._app.list_memories(
            caller, request.page_size, request.page_token, found_by
        )
        return mpb.ListMemoriesResponse(
            memories=[records.memory_to_pb(m, self._ids) for m in memories],
            next_page_token=token,
        )

    async def DeleteMemory(
        self, request: mpb.DeleteMemoryRequest, context: Context
    ) -> mpb.DeleteMemoryResponse:
        memory_id = self._ids.memory_row(request.memory_id, "memory_id")
        await self._app.delete(caller_for(request.user_id), memory_id)
        return mpb.DeleteMemoryResponse()

    async def UpdateMemory(
        self, request: mpb.UpdateMemoryRequest, context: Context
    ) -> mpb.UpdateMemoryResponse:
        memory_id = self._ids.memory_row(request.memory_id, "memory_id")
        caller = caller_for(request.user_id)
        change = memory_requests.edit_from_pb(request)
        try:
            memory = await self._app.update(caller, memory_id, change)
        except NamesAMemory as refused:
            raise FailedPrecondition(
                refused.template.format(self._ids.memory(refused.row))
            ) from None
        return mpb.UpdateMemoryResponse(memory=records.memory_to_pb(memory, self._ids))

    async def ListMemoryHistory(
        self, request: mpb.ListMemoryHistoryRequest, context: Context
    ) -> mpb.ListMemoryHistoryResponse:
        memory_id = self._ids.memory_row(request.memory_id, "memory_id")
        changes, token = await self._app.changes(
            caller_for(request.user_id), memory_id, request.page_size, request.page_token
        )
        return mpb.ListMemoryHistoryResponse(
            changes=[memory_requests.change_to_pb(c, self._ids) for c in changes],
            next_page_token=token,
        )


@dataclass(frozen=True, slots=True)
class PromptServicer(prompts_pb2_grpc.PromptServiceServicer):  # type: ignore[misc]
    _app: PromptsApp

    async def UpsertTemplate(
        self, request: ppb.UpsertTemplateRequest, context: Context
    ) -> ppb.UpsertTemplateResponse:
        template = await self._app.upsert_template(
            caller_tenant(), request.scenario, request.system_prompt, not request.disabled
        )
        return ppb.UpsertTemplateResponse(template=records.template_to_pb(template))

    async def ListTemplates(
        self, request: ppb.ListTemplatesRequest, context: Context
    ) -> ppb.ListTemplatesResponse:
        templates = await self._app.list_templates(caller_tenant())
        return ppb.ListTemplatesResponse(templates=[records.template_to_pb(t) for t in templates])

    async def DeleteTemplate(
        self, request: ppb.DeleteTemplateRequest, context: Context
    ) -> ppb.DeleteTemplateResponse:
        await self._app.delete_template(caller_tenant(), request.scenario)
        return ppb.DeleteTemplateResponse()

    async def UpsertSkill(
        self, request: ppb.UpsertSkillRequest, context: Context
    ) -> ppb.UpsertSkillResponse:
        skill = await self._app.upsert_skill(caller_tenant(), records.skill_from_pb(request.skill))
        return ppb.UpsertSkillResponse(skill=records.skill_to_pb(skill))

    async def ListSkills(
        self, request: ppb.ListSkillsRequest, context: Context
    ) -> ppb.ListSkillsResponse:
        skills = await self._app.list_skills(caller_tenant(), request.app, request.enabled_only)
        return ppb.ListSkillsResponse(skills=[records.skill_to_pb(s) for s in skills])

    async def DeleteSkill(
        self, request: ppb.DeleteSkillRequest, context: Context
    ) -> ppb.DeleteSkillResponse:
        await self._app.delete_skill(caller_tenant(), request.name)
        return ppb.DeleteSkillResponse()
