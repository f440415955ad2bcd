using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Grpc.Core;
using Microsoft.Extensions.AI;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary><see cref="ContextdChatReducer"/>: a host's own conversation fitted to a budget by BuildMessages.</summary>
    [Collection(LiveServers.Name)]
    public sealed class ChatReducerTests
    {
        private readonly Servers _servers;

        public ChatReducerTests(Servers servers) => _servers = servers;

        private static List<ChatMessage> Conversation(int exchanges)
        {
            var messages = new List<ChatMessage> { new ChatMessage(ChatRole.System, "You are an Excel expert.") };
            for (var i = 0; i < exchanges; i++)
            {
                messages.Add(new ChatMessage(ChatRole.User, "Question " + i + ": which formula sums the travel costs of the budget sheet?"));
                messages.Add(new ChatMessage(ChatRole.Assistant, "Answer " + i + ": =SUMIF(A:A, \"Travel\", B:B) sums them."));
            }
            messages.Add(new ChatMessage(ChatRole.User, "And for March only?"));
            return messages;
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task The_oldest_history_goes_first_and_the_kept_messages_are_the_callers_own(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            BuildReport? reported = null;
            var reducer = new ContextdChatReducer(client, new ContextdChatReducerOptions
            {
                TokenBudget = 120,
                Tokenizer = "cl100k_base",
                ReportCallback = r => reported = r,
            });
            var messages = Conversation(8);

            var reduction = await reducer.ReduceWithReportAsync(messages);

            Assert.Same(messages[0], reduction.Messages[0]);
            Assert.Same(messages[messages.Count - 1], reduction.Messages[reduction.Messages.Count - 1]);
            var dropped = Assert.Single(reduction.Report.Dropped);
            Assert.Equal(DropReason.Budget, dropped.Reason);
            Assert.Equal(0, dropped.StartIndex);
            // The newest history stays, whole and in order.
            var kept = messages.Skip(1 + dropped.Count).Take(16 - dropped.Count).ToList();
            Assert.Equal(kept, reduction.Messages.Skip(1).Take(kept.Count));
            Assert.Equal(kept.Count + 2, reduction.Messages.Count);
            Assert.True(reduction.Report.TotalTokens <= 120);
            Assert.Same(reduction.Report, reported);

            IChatReducer asInterface = reducer;
            var reduced = (await asInterface.ReduceAsync(messages, CancellationToken.None)).ToList();
            Assert.Equal(reduction.Messages, reduced);
        }

        [Fact]
        public async Task Tool_calls_stay_with_their_results_and_a_list_ending_in_results_keeps_them()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc);
            var reducer = new ContextdChatReducer(client, new ContextdChatReducerOptions { TokenBudget = 4000 });
            var call = new FunctionCallContent("call_1", "get_weather", new Dictionary<string, object?> { ["city"] = "Paris" });
            var orphan = new FunctionCallContent("call_2", "get_time", new Dictionary<string, object?>());
            var messages = new List<ChatMessage>
            {
                new ChatMessage(ChatRole.System, "Be brief."),
                new ChatMessage(ChatRole.System, "Use metric units."),
                new ChatMessage(ChatRole.User, "Weather in Paris?"),
                new ChatMessage(ChatRole.Assistant, new List<AIContent> { call, orphan }),
                new ChatMessage(ChatRole.Tool, new List<AIContent> { new FunctionResultContent("call_1", "sunny") }),
            };

            var reduction = await reducer.ReduceWithReportAsync(messages);

            // Two system messages join into one, contextd's.
            Assert.Equal("Be brief.\nUse metric units.", reduction.Messages[0].Text);
            Assert.Same(messages[2], reduction.Messages[1]);
            // The call nobody answered was removed: the assistant message is a new one.
            var assistant = reduction.Messages[2];
            Assert.NotSame(messages[3], assistant);
            var kept = Assert.Single(assistant.Contents.OfType<FunctionCallContent>());
            Assert.Equal("call_1", kept.CallId);
            Assert.Equal("Paris", kept.Arguments!["city"]!.ToString());
            Assert.Equal("call_2", Assert.Single(reduction.Report.RemovedToolCalls).ToolCallId);
            Assert.Same(messages[4], reduction.Messages[3]);
            Assert.Equal(4, reduction.Messages.Count);
        }

        [Fact]
        public async Task Edited_tool_results_come_back_as_new_messages_and_the_rest_as_the_callers_own()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc);
            var reducer = new ContextdChatReducer(client, new ContextdChatReducerOptions
            {
                TokenBudget = 10000,
                Tokenizer = "estimate",
                Editing = new ContextEditing { ClearTriggerTokens = 1, KeepToolResults = 1, ClearAtLeastTokens = 0 },
            });
            var messages = new List<ChatMessage> { new ChatMessage(ChatRole.User, "Find it.") };
            for (var k = 0; k < 2; k++)
            {
                var call = new FunctionCallContent("c" + k, "search", new Dictionary<string, object?>());
                messages.Add(new ChatMessage(ChatRole.Assistant, new List<AIContent> { call }));
                messages.Add(new ChatMessage(ChatRole.Tool, new List<AIContent>
                {
                    new FunctionResultContent("c" + k, string.Concat(Enumerable.Repeat("word ", 400))),
                }));
            }
            messages.Add(new ChatMessage(ChatRole.User, "Next?"));

            var reduction = await reducer.ReduceWithReportAsync(messages);

            var edit = Assert.Single(reduction.Report.Edits);
            Assert.Equal((2, EditKind.Cleared, "c0"), (edit.Index, edit.Kind, edit.ToolCallId));
            Assert.Equal(messages.Count, reduction.Messages.Count);
            var cleared = Assert.Single(reduction.Messages[2].Contents.OfType<FunctionResultContent>());
            Assert.NotSame(messages[2], reduction.Messages[2]);
            Assert.StartsWith("[tool result cleared to save context: search, call c0", cleared.Result?.ToString());
            foreach (var i in new[] { 0, 1, 3, 4, 5 })
            {
                Assert.Same(messages[i], reduction.Messages[i]);
            }
        }

        [Fact]
        public async Task A_host_that_calls_its_own_model_reduces_through_UseChatReducer()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc);
            var reducer = new ContextdChatReducer(client, new ContextdChatReducerOptions { TokenBudget = 80, Tokenizer = "cl100k_base" });
            var model = new RecordingChatClient();
            using var chat = new ChatClientBuilder(model).UseChatReducer(reducer).Build();

            var response = await chat.GetResponseAsync(Conversation(8));

            Assert.Equal("recorded", response.Text);
            var seen = Assert.Single(model.Calls);
            Assert.True(seen.Count < Conversation(8).Count, "the model got the whole conversation");
            Assert.Equal(ChatRole.System, seen[0].Role);
            Assert.Equal("And for March only?", seen[seen.Count - 1].Text);
        }

        [Fact]
        public async Task Bad_budgets_are_refused()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc);
            var error = Assert.Throws<ArgumentException>(() => new ContextdChatReducer(client, new ContextdChatReducerOptions()));
            Assert.Contains("TokenBudget", error.Message);

            var strict = new ContextdChatReducer(client, new ContextdChatReducerOptions { TokenBudget = 5, OverflowPolicy = OverflowPolicy.Fail });
            var over = await Assert.ThrowsAsync<ContextdException>(() => strict.ReduceAsync(Conversation(1), CancellationToken.None));
            Assert.Equal(StatusCode.FailedPrecondition, over.StatusCode);
        }

        /// <summary>Stands for the host's own model: records what it was sent.</summary>
        private sealed class RecordingChatClient : IChatClient
        {
            public List<List<ChatMessage>> Calls { get; } = new List<List<ChatMessage>>();

            public Task<ChatResponse> GetResponseAsync(IEnumerable<ChatMessage> messages, ChatOptions? options = null, CancellationToken cancellationToken = default)
            {
                Calls.Add(messages.ToList());
                return Task.FromResult(new ChatResponse(new ChatMessage(ChatRole.Assistant, "recorded")));
            }

            public IAsyncEnumerable<ChatResponseUpdate> GetStreamingResponseAsync(IEnumerable<ChatMessage> messages, ChatOptions? options = null, CancellationToken cancellationToken = default) =>
                throw new NotSupportedException();

            public object? GetService(Type serviceType, object? serviceKey = null) => null;

            public void Dispose()
            {
            }
        }
    }
}
