using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Text.Json;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Google.Protobuf.WellKnownTypes;
using Grpc.Core;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary>Every RPC of every service, over gRPC (HTTP/2) and both gRPC-Web formats (HTTP/1.1).</summary>
    [Collection(LiveServers.Name)]
    public sealed class ServiceTests
    {
        private readonly Servers _servers;

        public ServiceTests(Servers servers) => _servers = servers;

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task ContextService_assembles_builds_counts_and_collects(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();

            var assembled = await client.AssemblePromptAsync(new AssemblePromptRequest
            {
                Layers = new PromptLayers { Identity = "You are an Excel expert.", Rules = "Answer with one formula.", Mode = " " },
            });
            Assert.Equal("You are an Excel expert.\n\nAnswer with one formula.", assembled.SystemPrompt);
            Assert.Equal(new[] { "identity", "rules", "skill", "mode", "memory", "context" }, assembled.Layers.Select(l => l.Name));
            Assert.Equal(new[] { true, true, false, false, false, false }, assembled.Layers.Select(l => l.Included));
            Assert.Equal(assembled.Layers.Sum(l => l.Tokens), assembled.Tokens);

            var request = new BuildMessagesRequest { UserMessage = "And for March only?", TokenBudget = 60, Tokenizer = "cl100k_base" };
            request.SystemPrompts.Add("You are an Excel expert.");
            for (var i = 0; i < 6; i++)
            {
                request.History.Add(new Message { Id = "u" + i, Role = Role.User, Content = "Question number " + i + " about the budget sheet" });
                request.History.Add(new Message { Id = "a" + i, Role = Role.Assistant, Content = "=SUMIF(A:A, \"Travel\", B:B) for row " + i });
            }
            var built = await client.BuildMessagesAsync(request);
            Assert.Equal(Role.System, built.Messages.First().Role);
            Assert.Equal("And for March only?", built.Messages.Last().Content);
            Assert.True(built.Report.TotalTokens <= 60, "over the budget: " + built.Report);
            var dropped = Assert.Single(built.Report.Dropped);
            Assert.Equal(DropReason.Budget, dropped.Reason);
            Assert.Equal(0, dropped.StartIndex);
            Assert.Equal(12 - dropped.Count, built.Report.HistoryKept);
            // What was kept is the newest history, in order.
            Assert.Equal(request.History.Skip(dropped.Count).Select(m => m.Id), built.Messages.Skip(1).SkipLast(1).Select(m => m.Id));

            var counting = new CountTokensRequest { Tokenizer = "cl100k_base" };
            counting.Texts.Add("=SUMIF(A:A, \"Travel\", B:B)");
            counting.Texts.Add("hello");
            counting.Messages.Add(new Message { Role = Role.User, Content = "hello" });
            var counted = await client.CountTokensAsync(counting);
            Assert.Equal("cl100k_base", counted.Tokenizer);
            Assert.Equal(2, counted.TextTokens.Count);
            Assert.Equal(1, counted.TextTokens[1]);
            Assert.True(counted.MessageTokens[0] > counted.TextTokens[1], "a message counts its framing too");
            Assert.Equal(counted.TextTokens.Sum() + counted.MessageTokens.Sum(), counted.TotalTokens);

            var tokenizers = await client.ListTokenizersAsync(new ListTokenizersRequest());
            Assert.Contains(tokenizers.Tokenizers, t => t.Name == "cl100k_base" && t.Available);
            Assert.Contains(tokenizers.Tokenizers, t => t.Name == tokenizers.DefaultTokenizer);

            var completed = await client.RunChatTurnAsync(Requests.Turn(user, "Which formula sums column B?"), onEvent: null);
            var collected = await client.CollectAsync(new CollectRequest { UserId = user, MessageId = completed.AssistantMessageId, Remember = true });
            Assert.True(collected.IsCollected);
            Assert.Equal(completed.AssistantMessageId, collected.MessageId);
            var memories = await client.ListMemoriesAsync(new ListMemoriesRequest { UserId = user });
            Assert.Equal(collected.MemoryId, Assert.Single(memories.Memories).Id);
            var uncollected = await client.CollectAsync(new CollectRequest { UserId = user, MessageId = completed.AssistantMessageId, Uncollect = true });
            Assert.False(uncollected.IsCollected);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task SessionService_covers_a_session_from_creation_to_deletion(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();

            var create = new CreateSessionRequest { UserId = user, Scenario = "excel", Host = "excel", Title = "Quarterly budget" };
            create.Metadata.Add("sheet", "Budget 2026");
            var session = (await client.CreateSessionAsync(create)).Session;
            Assert.NotEmpty(session.Id);
            Assert.Equal("Budget 2026", session.Metadata["sheet"]);

            var fetched = (await client.GetSessionAsync(new GetSessionRequest { UserId = user, SessionId = session.Id })).Session;
            Assert.Equal("Quarterly budget", fetched.Title);
            Assert.Equal(0, fetched.MessageCount);

            var append = new AppendMessagesRequest { UserId = user, SessionId = session.Id, TurnIndex = 1 };
            append.Messages.Add(new Message { Role = Role.User, Content = "Sum column B" });
            append.Messages.Add(new Message { Role = Role.Assistant, Content = "=SUM(B:B)" });
            var appended = await client.AppendMessagesAsync(append);
            Assert.Equal(new[] { 0, 1 }, appended.Messages.Select(m => m.Seq));

            var listed = await client.ListMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = session.Id });
            Assert.Equal(new[] { "Sum column B", "=SUM(B:B)" }, listed.Messages.Select(m => m.Message.Content));
            Assert.Empty(listed.NextPageToken);

            var summary = new AddCompressionSummaryRequest
            {
                UserId = user,
                SessionId = session.Id,
                StartMessageId = listed.Messages[0].Message.Id,
                Summary = "The user asked for the sum of column B.",
            };
            summary.MessageIds.Add(listed.Messages.Select(m => m.Message.Id));
            Assert.NotEmpty((await client.AddCompressionSummaryAsync(summary)).SummaryId);
            await client.SetSessionSummaryAsync(new SetSessionSummaryRequest { UserId = user, SessionId = session.Id, Summary = "Budget sums" });

            var sessions = await client.ListSessionsAsync(new ListSessionsRequest { UserId = user, PageSize = 1 });
            Assert.Equal(session.Id, Assert.Single(sessions.Sessions).Id);

            // A turn writes the event log that ExportEvents streams.
            await client.RunChatTurnAsync(Requests.Turn(user, "And column C?", session.Id), onEvent: null);
            Assert.True((await client.EndSessionAsync(new EndSessionRequest { UserId = user, SessionId = session.Id, Mode = "test" })).Ended);
            Assert.False((await client.EndSessionAsync(new EndSessionRequest { UserId = user, SessionId = session.Id })).Ended);

            var exported = new List<string>();
            await foreach (var item in client.ExportEventsAsync(new ExportEventsRequest { UserId = user, SessionId = session.Id }))
            {
                using var line = JsonDocument.Parse(item.Json);
                exported.Add(line.RootElement.GetProperty("type").GetString()!);
            }
            // The session had messages before its first turn: its log starts at that turn.
            Assert.Equal(new[] { "session_start", "turn_start" }, exported.Take(2));
            Assert.Contains("final", exported);
            Assert.Equal("session_end", exported.Last());
            var asList = await client.ExportEventsListAsync(new ExportEventsRequest { UserId = user, SessionId = session.Id, After = 1 });
            Assert.Equal(exported.Count - 1, asList.Count);
            var xml = await client.ExportEventsListAsync(new ExportEventsRequest { UserId = user, SessionId = session.Id, Format = ExportFormat.Xml });
            var document = string.Concat(xml.Select(x => x.Xml));
            Assert.StartsWith("<?xml", document);
            Assert.Contains("<session_end", document);

            await client.DeleteSessionAsync(new DeleteSessionRequest { UserId = user, SessionId = session.Id });
            var gone = await Assert.ThrowsAsync<ContextdException>(
                () => client.GetSessionAsync(new GetSessionRequest { UserId = user, SessionId = session.Id }));
            Assert.Equal(StatusCode.NotFound, gone.StatusCode);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task MemoryService_adds_searches_lists_and_deletes(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();

            var added = await client.AddMemoryAsync(new AddMemoryRequest { UserId = user, Content = "Prefers XLOOKUP over VLOOKUP" });
            Assert.True(added.Created);
            var again = await client.AddMemoryAsync(new AddMemoryRequest { UserId = user, Content = "prefers  xlookup over vlookup" });
            Assert.False(again.Created);
            Assert.Equal(added.Memory.Id, again.Memory.Id);
            await client.AddMemoryAsync(new AddMemoryRequest { UserId = user, Content = "Works on the travel budget" });

            var found = await client.SearchMemoriesAsync(new SearchMemoriesRequest { UserId = user, Query = "XLOOKUP", Limit = 5 });
            Assert.Equal(added.Memory.Id, found.Results.First().Memory.Id);
            Assert.True(found.Results.First().Score > 0);

            var listed = await client.ListMemoriesAsync(new ListMemoriesRequest { UserId = user });
            Assert.Equal(2, listed.Memories.Count);

            await client.DeleteMemoryAsync(new DeleteMemoryRequest { UserId = user, MemoryId = added.Memory.Id });
            var left = await client.ListMemoriesAsync(new ListMemoriesRequest { UserId = user });
            Assert.Equal("Works on the travel budget", Assert.Single(left.Memories).Content);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task MemoryService_scopes_supersedes_and_keeps_the_history(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();

            var job = await client.AddMemoryAsync(new AddMemoryRequest
            {
                UserId = user,
                Content = "Works on the travel budget",
                Scope = new MemoryScope { App = "excel" },
                Metadata = { ["topic"] = "work" },
                ExpireTime = Timestamp.FromDateTime(DateTime.UtcNow.AddDays(1)),
            });
            Assert.Equal("excel", job.Memory.Scope.App);
            Assert.NotNull(job.Memory.ExpireTime);
            var inExcel = await client.ListMemoriesAsync(new ListMemoriesRequest
            {
                UserId = user,
                Filter = new MemoryFilter { App = "excel", Metadata = { ["topic"] = "work" } },
            });
            Assert.Equal(job.Memory.Id, Assert.Single(inExcel.Memories).Id);
            var unscoped = await client.ListMemoriesAsync(new ListMemoriesRequest { UserId = user, Filter = new MemoryFilter { App = "" } });
            Assert.Empty(unscoped.Memories);

            var before = Timestamp.FromDateTime(DateTime.UtcNow);
            var update = new UpdateMemoryRequest
            {
                UserId = user,
                MemoryId = job.Memory.Id,
                Memory = new Memory { Content = "Works on the sales budget" },
                UpdateMask = new FieldMask { Paths = { "content" } },
                Supersede = true,
            };
            var updated = await client.UpdateMemoryAsync(update);
            Assert.Equal(job.Memory.Id, updated.Memory.Id);
            var then = await client.SearchMemoriesAsync(new SearchMemoriesRequest
            {
                UserId = user,
                Query = "budget",
                Filter = new MemoryFilter { AsOf = before },
            });
            var past = Assert.Single(then.Results).Memory;
            Assert.Equal(("Works on the travel budget", job.Memory.Id), (past.Content, past.SupersededBy));

            var history = await client.ListMemoryHistoryAsync(new ListMemoryHistoryRequest { UserId = user, MemoryId = job.Memory.Id });
            var change = Assert.Single(history.Changes);
            Assert.Equal(("update", "api", past.Id), (change.Action, change.Method, change.ReplacedMemoryId));

            var refused = await Assert.ThrowsAsync<ContextdException>(() => client.UpdateMemoryAsync(new UpdateMemoryRequest
            {
                UserId = user,
                MemoryId = job.Memory.Id,
                Memory = new Memory { Content = "x" },
            }));
            Assert.Equal(StatusCode.InvalidArgument, refused.StatusCode);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task PromptService_templates_and_skills_shape_a_session_build(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();
            // Templates and skills are server-wide: names of this test only.
            var scenario = "scenario-" + Guid.NewGuid().ToString("N").Substring(0, 8);
            var host = "host-" + Guid.NewGuid().ToString("N").Substring(0, 8);
            var skillName = "skill-" + Guid.NewGuid().ToString("N").Substring(0, 8);

            var template = await client.UpsertTemplateAsync(new UpsertTemplateRequest { Scenario = scenario, SystemPrompt = "You help with the sheet {{sheet}}." });
            Assert.Equal(1, template.Template.Version);
            Assert.Contains((await client.ListTemplatesAsync(new ListTemplatesRequest())).Templates, t => t.Scenario == scenario);
            var skill = new Skill { Name = skillName, Description = "Sums", Prompt = "Prefer SUMIFS.", Enabled = true };
            skill.Apps.Add(host);
            await client.UpsertSkillAsync(new UpsertSkillRequest { Skill = skill });
            Assert.Equal(skillName, Assert.Single((await client.ListSkillsAsync(new ListSkillsRequest { App = host })).Skills, s => s.Name == skillName).Name);

            var session = (await client.CreateSessionAsync(new CreateSessionRequest { UserId = user, Scenario = scenario, Host = host })).Session;
            var context = new SessionContext { UserId = user, SessionId = session.Id };
            context.Variables.Add("sheet", "Budget 2026");
            var built = await client.BuildMessagesAsync(new BuildMessagesRequest { Session = context, UserMessage = "Sum B", TokenBudget = 4000 });
            var system = built.Messages.First(m => m.Role == Role.System).Content;
            Assert.Contains("You help with the sheet Budget 2026.", system);
            Assert.Contains("Prefer SUMIFS.", system);
            Assert.Contains(built.Report.ContextLayers, l => l.Name == "scenario" && l.Included);

            await client.DeleteTemplateAsync(new DeleteTemplateRequest { Scenario = scenario });
            await client.DeleteSkillAsync(new DeleteSkillRequest { Name = skillName });
            Assert.DoesNotContain((await client.ListTemplatesAsync(new ListTemplatesRequest())).Templates, t => t.Scenario == scenario);
            Assert.DoesNotContain((await client.ListSkillsAsync(new ListSkillsRequest())).Skills, s => s.Name == skillName);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task UserService_erases_everything_of_a_user(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();
            await client.RunChatTurnAsync(Requests.Turn(user, "Remember that I like pivot tables"), onEvent: null);
            await client.AddMemoryAsync(new AddMemoryRequest { UserId = user, Content = "Likes pivot tables" });

            var refused = await Assert.ThrowsAsync<ContextdException>(
                () => client.DeleteUserAsync(new DeleteUserRequest { UserId = user, ConfirmUserId = user + "x" }));
            Assert.Equal(StatusCode.InvalidArgument, refused.StatusCode);
            Assert.Contains(refused.FieldViolations, v => v.Field == "confirm_user_id");

            var deleted = await client.DeleteUserAsync(new DeleteUserRequest { UserId = user, ConfirmUserId = user });
            Assert.Equal(1, deleted.Sessions);
            Assert.Equal(2, deleted.Messages);
            Assert.True(deleted.Memories >= 1);
            Assert.Equal(1, deleted.EventLogs);
            Assert.Empty((await client.ListSessionsAsync(new ListSessionsRequest { UserId = user })).Sessions);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task ChatService_streams_a_turn_to_the_end(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();

            var events = new List<StreamChatResponse>();
            await foreach (var item in client.StreamChatAsync(Requests.Turn(user, "Which formula sums column B?")))
            {
                events.Add(item);
            }
            var kinds = events.Select(e => e.EventCase).ToList();
            Assert.Equal(StreamChatResponse.EventOneofCase.TurnStarted, kinds.First());
            Assert.Equal(StreamChatResponse.EventOneofCase.TurnCompleted, kinds.Last());
            Assert.True(kinds.Count(k => k == StreamChatResponse.EventOneofCase.TextDelta) > 1, "the answer streams in pieces");
            Assert.Contains(StreamChatResponse.EventOneofCase.Usage, kinds);
            var started = events.First().TurnStarted;
            var completed = events.Last().TurnCompleted;
            Assert.Equal(1, started.TurnIndex);
            Assert.Equal("echo", started.Provider);
            Assert.Equal(TurnStatus.Ok, completed.Status);
            var streamed = string.Concat(events.Where(e => e.EventCase == StreamChatResponse.EventOneofCase.TextDelta).Select(e => e.TextDelta.Text));
            Assert.Equal(completed.FinalText, streamed);
            Assert.Contains("Which formula sums column B?", streamed);

            // The same session again, through the callback form VB uses: the second turn sees the first.
            var seen = new List<StreamChatResponse.EventOneofCase>();
            var second = await client.RunChatTurnAsync(Requests.Turn(user, "And column C?", started.SessionId), e => seen.Add(e.EventCase));
            Assert.Equal(StreamChatResponse.EventOneofCase.TurnCompleted, seen.Last());
            Assert.Contains("I received 4 messages", second.FinalText);
            Assert.Equal(completed.TurnUsage.CompletionTokens + second.TurnUsage.CompletionTokens, second.SessionUsage.CompletionTokens);
            var stored = await client.ListMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = started.SessionId });
            Assert.Equal(new[] { "", "", "", "" }, stored.Messages.Select(m => m.Status));
            Assert.Equal(second.FinalText, stored.Messages.Last().Message.Content);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task ChatService_turn_cancelled_midway_keeps_the_partial_answer(Transport transport)
        {
            using var client = Servers.Client(_servers.Slow, transport);
            var user = _servers.NewUser();
            // The echo answer quotes the message: a long one streams for seconds.
            var message = string.Join(" ", Enumerable.Range(1, 80).Select(i => "word" + i));
            using var cancel = new System.Threading.CancellationTokenSource();
            var received = new StringBuilder();
            var sessionId = "";
            var watch = System.Diagnostics.Stopwatch.StartNew();
            await Assert.ThrowsAnyAsync<OperationCanceledException>(async () =>
            {
                await foreach (var item in client.StreamChatAsync(Requests.Turn(user, message), cancel.Token))
                {
                    if (item.EventCase == StreamChatResponse.EventOneofCase.TurnStarted)
                    {
                        sessionId = item.TurnStarted.SessionId;
                    }
                    if (item.EventCase == StreamChatResponse.EventOneofCase.TextDelta)
                    {
                        received.Append(item.TextDelta.Text);
                        if (received.Length > 30)
                        {
                            cancel.Cancel();
                        }
                    }
                }
            });
            Assert.True(watch.Elapsed < TimeSpan.FromSeconds(5), "the cancel took " + watch.Elapsed);
            Assert.NotEmpty(sessionId);

            // The server stores the partial answer once it sees the cancel.
            SessionMessage? answer = null;
            for (var attempt = 0; attempt < 50 && answer == null; attempt++)
            {
                var stored = await client.ListMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = sessionId });
                answer = stored.Messages.FirstOrDefault(m => m.Message.Role == Role.Assistant);
                if (answer == null)
                {
                    await Task.Delay(100);
                }
            }
            Assert.NotNull(answer);
            Assert.Equal("cancelled", answer!.Status);
            Assert.StartsWith(received.ToString(), answer.Message.Content);
            Assert.DoesNotContain("word80", answer.Message.Content);
        }
    }
}
