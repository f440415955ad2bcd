using System;
using System.Collections.Generic;
using System.ComponentModel;
using System.Linq;
using System.Text.Json;
using System.Threading;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Grpc.Core;
using Microsoft.Extensions.AI;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary><see cref="ContextdChatClient"/> as an <see cref="IChatClient"/>, against live servers.</summary>
    [Collection(LiveServers.Name)]
    public sealed class ChatClientTests
    {
        private readonly Servers _servers;

        public ChatClientTests(Servers servers) => _servers = servers;

        private (ContextdClient Client, IChatClient Chat, string User) Echo(Transport transport = Transport.Grpc)
        {
            var user = _servers.NewUser("chat");
            var client = Servers.Client(_servers.Plain, transport);
            return (client, new ContextdChatClient(client, new ContextdChatClientOptions { UserId = user, Mode = "meai" }), user);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task A_lone_question_starts_a_session_and_the_conversation_id_continues_it(Transport transport)
        {
            var (client, chat, user) = Echo(transport);
            using var _ = client;

            var first = await chat.GetResponseAsync("Which formula sums column B?");
            Assert.False(string.IsNullOrEmpty(first.ConversationId));
            // The server's system message and the question.
            Assert.StartsWith("echo: I received 2 messages", first.Text);
            Assert.Contains("Which formula sums column B?", first.Text);
            Assert.Equal(ChatFinishReason.Stop, first.FinishReason);
            Assert.Equal("echo", first.ModelId);
            var message = Assert.Single(first.Messages);
            Assert.Equal(ChatRole.Assistant, message.Role);
            Assert.Equal(first.ResponseId, message.MessageId);
            Assert.Equal(TurnStatus.Ok, first.AdditionalProperties![ContextdProperties.TurnStatus]);
            Assert.Equal(1, first.AdditionalProperties[ContextdProperties.TurnIndex]);
            Assert.IsType<TurnCompleted>(first.RawRepresentation);

            // Usage: the echo provider's own counts, which contextd marks estimated.
            var completed = (TurnCompleted)first.RawRepresentation!;
            Assert.NotNull(first.Usage);
            Assert.Equal(completed.TurnUsage.PromptTokens, first.Usage!.InputTokenCount);
            Assert.Equal(completed.TurnUsage.CompletionTokens, first.Usage.OutputTokenCount);
            Assert.Equal(first.Usage.InputTokenCount + first.Usage.OutputTokenCount, first.Usage.TotalTokenCount);
            Assert.Equal(1, first.Usage.AdditionalCounts![ContextdProperties.Estimated]);
            Assert.True(first.Usage.AdditionalCounts[ContextdProperties.PromptTokensEstimate] > 0);

            var second = await chat.GetResponseAsync(
                new[] { new ChatMessage(ChatRole.User, "And column C?") },
                new ChatOptions { ConversationId = first.ConversationId });
            Assert.Equal(first.ConversationId, second.ConversationId);
            Assert.Equal(2, second.AdditionalProperties![ContextdProperties.TurnIndex]);
            Assert.StartsWith("echo: I received 4 messages", second.Text);

            var stored = await client.ListMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = first.ConversationId });
            Assert.Equal(new[] { "Which formula sums column B?", first.Text, "And column C?", second.Text }, stored.Messages.Select(m => m.Message.Content));
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task Streaming_updates_add_up_to_the_answer(Transport transport)
        {
            var (client, chat, _) = Echo(transport);
            using var __ = client;

            var updates = new List<ChatResponseUpdate>();
            await foreach (var update in chat.GetStreamingResponseAsync("Stream me an answer, please"))
            {
                updates.Add(update);
            }
            var conversation = updates[0].ConversationId;
            Assert.False(string.IsNullOrEmpty(conversation));
            Assert.All(updates, u => Assert.Equal(conversation, u.ConversationId));
            Assert.True(updates.Count(u => u.Contents.OfType<TextContent>().Any()) > 1, "the text streams in pieces");
            Assert.Equal(ChatFinishReason.Stop, updates.Last().FinishReason);

            var response = updates.ToChatResponse();
            Assert.Equal(conversation, response.ConversationId);
            Assert.Contains("Stream me an answer, please", response.Text);
            var final = ((StreamChatResponse)updates.Last().RawRepresentation!).TurnCompleted;
            Assert.Equal(final.FinalText, response.Text);
            Assert.Equal(final.TurnUsage.CompletionTokens, response.Usage!.OutputTokenCount);
            Assert.Equal(final.AssistantMessageId, response.Messages.Single().MessageId);
        }

        [Fact]
        public async Task A_history_without_a_conversation_is_sent_as_the_hosts_own_list()
        {
            var (client, chat, user) = Echo();
            using var _ = client;
            var history = new List<ChatMessage>
            {
                new ChatMessage(ChatRole.System, "You are an Excel expert."),
                new ChatMessage(ChatRole.User, "Sum column B"),
                new ChatMessage(ChatRole.Assistant, "=SUM(B:B)"),
                new ChatMessage(ChatRole.User, "And column C?"),
            };
            var response = await chat.GetResponseAsync(history, new ChatOptions { Instructions = "Answer with one formula." });
            // Instructions and the system message are one system message: 4 messages reach the model.
            Assert.StartsWith("echo: I received 4 messages", response.Text);
            Assert.EndsWith("“And column C?”", response.Text);
            var context = (BuildReport)response.AdditionalProperties![ContextdProperties.Context]!;
            Assert.Equal(2, context.HistoryKept);

            var events = await client.ExportEventsListAsync(new ExportEventsRequest { UserId = user, SessionId = response.ConversationId });
            using var start = JsonDocument.Parse(events[0].Json);
            Assert.Equal("meai", start.RootElement.GetProperty("meta").GetProperty("mode").GetString());
        }

        [Fact]
        public async Task Images_go_as_parts_of_the_users_message()
        {
            var (client, chat, _) = Echo();
            using var __ = client;
            var message = new ChatMessage(ChatRole.User, new List<AIContent>
            {
                new TextContent("What does this show?"),
                new DataContent(TinyPng, "image/png"),
            });
            var response = await chat.GetResponseAsync(new[] { message });
            Assert.Contains("[image image/png 1x1, " + TinyPng.Length + " bytes]", response.Text);
        }

        [Fact]
        public async Task Cancelling_a_streamed_turn_stops_it_and_keeps_the_partial_answer()
        {
            var user = _servers.NewUser("chat");
            using var client = Servers.Client(_servers.Slow, Transport.Grpc);
            IChatClient chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = user });
            using var cancel = new CancellationTokenSource();
            var question = string.Join(" ", Enumerable.Range(1, 80).Select(i => "word" + i));
            string? conversation = null;
            var text = "";
            await Assert.ThrowsAnyAsync<OperationCanceledException>(async () =>
            {
                await foreach (var update in chat.GetStreamingResponseAsync(question, cancellationToken: cancel.Token))
                {
                    conversation = update.ConversationId;
                    text += update.Text;
                    if (text.Length > 20)
                    {
                        cancel.Cancel();
                    }
                }
            });
            Assert.NotNull(conversation);

            SessionMessage? answer = null;
            for (var attempt = 0; attempt < 50 && answer == null; attempt++)
            {
                var stored = await client.ListMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = conversation });
                answer = stored.Messages.FirstOrDefault(m => m.Message.Role == Role.Assistant);
                if (answer == null)
                {
                    await Task.Delay(100);
                }
            }
            Assert.Equal("cancelled", answer!.Status);
            Assert.StartsWith(text, answer.Message.Content);
        }

        [Fact]
        public async Task Bad_requests_are_refused_before_any_call()
        {
            var (client, chat, _) = Echo();
            using var __ = client;
            var history = new[] { new ChatMessage(ChatRole.User, "a"), new ChatMessage(ChatRole.Assistant, "b"), new ChatMessage(ChatRole.User, "c") };

            var resent = await Assert.ThrowsAsync<ArgumentException>(() => chat.GetResponseAsync(history, new ChatOptions { ConversationId = "s1" }));
            Assert.Contains("send only the new user message", resent.Message);

            var results = new[] { new ChatMessage(ChatRole.Tool, new List<AIContent> { new FunctionResultContent("c1", "sunny") }) };
            var orphan = await Assert.ThrowsAsync<ArgumentException>(() => chat.GetResponseAsync(results));
            Assert.Contains("ConversationId", orphan.Message);

            var last = await Assert.ThrowsAsync<ArgumentException>(() => chat.GetResponseAsync(new[] { new ChatMessage(ChatRole.Assistant, "hi") }));
            Assert.Contains("the last message must be the user's", last.Message);

            await Assert.ThrowsAsync<ArgumentException>(() => chat.GetResponseAsync(Array.Empty<ChatMessage>()));
            await Assert.ThrowsAsync<ArgumentException>(() => chat.GetResponseAsync("hi", new ChatOptions { ConversationId = "s1", Instructions = "be brief" }));
            var required = new ChatOptions { ToolMode = ChatToolMode.RequireAny, Tools = new List<AITool> { AIFunctionFactory.Create(() => "x", "f") } };
            await Assert.ThrowsAsync<NotSupportedException>(() => chat.GetResponseAsync("hi", required));
            var audio = new ChatMessage(ChatRole.User, new List<AIContent> { new DataContent(new byte[] { 1 }, "audio/wav") });
            var notImage = await Assert.ThrowsAsync<ArgumentException>(() => chat.GetResponseAsync(new[] { audio }));
            Assert.Contains("messages[0].Contents[0]", notImage.Message);
        }

        [Fact]
        public async Task A_conversation_the_server_does_not_know_is_not_found()
        {
            var (client, chat, _) = Echo();
            using var __ = client;
            var error = await Assert.ThrowsAsync<ContextdException>(() => chat.GetResponseAsync("hi", new ChatOptions { ConversationId = "no-such-session" }));
            Assert.Equal(StatusCode.NotFound, error.StatusCode);
        }

        [Fact]
        public void GetService_gives_the_metadata_the_client_and_itself()
        {
            var (client, chat, _) = Echo();
            using var __ = client;
            var metadata = chat.GetService<ChatClientMetadata>();
            Assert.Equal("contextd", metadata!.ProviderName);
            Assert.Equal("http://" + _servers.Plain.Address + "/", metadata.ProviderUri!.ToString());
            Assert.Same(client, chat.GetService<ContextdClient>());
            Assert.Same(chat, chat.GetService<ContextdChatClient>());
            Assert.Same(chat, chat.GetService<IChatClient>());
            Assert.Null(chat.GetService<ChatClientMetadata>("a key"));
            Assert.Null(chat.GetService<string>());
        }

        [Fact]
        public async Task A_function_call_ends_the_turn_and_its_result_continues_it()
        {
            var model = _servers.Model;
            var user = _servers.NewUser("tools");
            using var client = Servers.Client(model.Server, Transport.Grpc);
            IChatClient chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = user });
            var options = new ChatOptions { Tools = new List<AITool> { WeatherFunction(_ => { }) } };

            var asked = await chat.GetResponseAsync("What is the weather in Paris?", options);
            Assert.Equal(ChatFinishReason.ToolCalls, asked.FinishReason);
            var call = Assert.Single(asked.Messages.SelectMany(m => m.Contents).OfType<FunctionCallContent>());
            Assert.Equal("get_weather", call.Name);
            Assert.Equal("call_weather_1", call.CallId);
            Assert.False(call.InformationalOnly);
            Assert.Equal("Paris", ((JsonElement)call.Arguments!["city"]!).GetString());
            // Usage as the provider reported it: not estimated.
            Assert.Equal(FakeOpenAi.PromptTokens, asked.Usage!.InputTokenCount);
            Assert.Equal(FakeOpenAi.CompletionTokens, asked.Usage.OutputTokenCount);
            Assert.Equal(0, asked.Usage.AdditionalCounts![ContextdProperties.Estimated]);

            var result = new ChatMessage(ChatRole.Tool, new List<AIContent> { new FunctionResultContent(call.CallId, "sunny, 21 °C") });
            var answered = await chat.GetResponseAsync(new[] { result }, new ChatOptions { ConversationId = asked.ConversationId, Tools = options.Tools });
            Assert.Equal(ChatFinishReason.Stop, answered.FinishReason);
            Assert.Equal("The tool said: sunny, 21 °C", answered.Text);
            Assert.Equal(asked.ConversationId, answered.ConversationId);
            var toolMessage = model.Model.LastRequestEndingWith("tool")["messages"]!.AsArray().Last()!;
            Assert.Equal("call_weather_1", (string)toolMessage["tool_call_id"]!);
        }

        [Fact]
        public async Task FunctionInvokingChatClient_runs_the_function_and_finishes_the_turn_streamed()
        {
            var model = _servers.Model;
            var user = _servers.NewUser("tools");
            using var client = Servers.Client(model.Server, Transport.GrpcWebText);
            var cities = new List<string>();
            using var chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = user })
                .AsBuilder()
                .UseFunctionInvocation()
                .Build();
            var options = new ChatOptions { Tools = new List<AITool> { WeatherFunction(cities.Add) } };

            var updates = new List<ChatResponseUpdate>();
            await foreach (var update in chat.GetStreamingResponseAsync("How is the weather in Paris today?", options))
            {
                updates.Add(update);
            }
            Assert.Equal(new[] { "Paris" }, cities);
            var response = updates.ToChatResponse();
            Assert.EndsWith("The tool said: sunny in Paris", response.Text);
            Assert.Equal(ChatFinishReason.Stop, updates.Last(u => u.FinishReason != null).FinishReason);
            // Both model calls of the turn: one asked for the function, one answered.
            var usage = response.Usage!;
            Assert.Equal(2 * FakeOpenAi.PromptTokens, usage.InputTokenCount);

            var stored = await client.ListMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = response.ConversationId });
            Assert.Equal(new[] { Role.User, Role.Assistant, Role.Tool, Role.Assistant }, stored.Messages.Select(m => m.Message.Role));
        }

        [Fact]
        public async Task The_servers_own_tool_calls_are_informational()
        {
            var model = _servers.Model;
            using var client = Servers.Client(model.Server, Transport.Grpc);
            IChatClient chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = _servers.NewUser("tools") });
            var updates = new List<ChatResponseUpdate>();
            await foreach (var update in chat.GetStreamingResponseAsync("Do you remember my budget?"))
            {
                updates.Add(update);
            }
            var call = Assert.Single(updates.SelectMany(u => u.Contents).OfType<FunctionCallContent>());
            Assert.Equal("memory_search", call.Name);
            Assert.True(call.InformationalOnly);
            Assert.Equal(ChatFinishReason.Stop, updates.Last().FinishReason);
            Assert.StartsWith("The tool said: ", updates.ToChatResponse().Text);
        }

        [Fact]
        public async Task A_provider_failure_after_the_turn_started_throws_ContextdTurnException()
        {
            var model = _servers.Model;
            using var client = Servers.Client(model.Server, Transport.Grpc);
            IChatClient chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = _servers.NewUser("tools") });

            var error = await Assert.ThrowsAsync<ContextdTurnException>(() => chat.GetResponseAsync("Please refuse this"));
            Assert.Equal(TurnStatus.Error, error.Status);
            Assert.NotEmpty(error.SessionId);
            Assert.StartsWith("the model provider failed: ", error.Message);
            Assert.NotEmpty(error.Turn.ErrorMessage);

            var streamed = await Assert.ThrowsAsync<ContextdTurnException>(async () =>
            {
                await foreach (var _ in chat.GetStreamingResponseAsync("Please refuse this too"))
                {
                }
            });
            Assert.Equal(TurnStatus.Error, streamed.Status);
        }

        [Fact]
        public async Task Model_options_reach_the_provider()
        {
            var model = _servers.Model;
            using var client = Servers.Client(model.Server, Transport.Grpc);
            IChatClient chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = _servers.NewUser("tools") });
            var options = new ChatOptions { ModelId = "fake-large", Temperature = 0.25f, MaxOutputTokens = 64, StopSequences = new List<string> { "END" } };
            var response = await chat.GetResponseAsync("Just answer", options);
            Assert.Equal(FakeOpenAi.Answer, response.Text);
            var sent = model.Model.LastRequestEndingWith("user", "Just answer");
            Assert.Equal(64, (int)sent["max_tokens"]!);
            Assert.Equal("fake-large", (string)sent["model"]!);
            Assert.Equal(0.25, (double)sent["temperature"]!, 3);
            Assert.Equal("END", (string)sent["stop"]!.AsArray().Single()!);
            Assert.Equal("fake-large", response.ModelId);
        }

        private static AIFunction WeatherFunction(Action<string> called) => AIFunctionFactory.Create(
            ([Description("The city")] string city) =>
            {
                called(city);
                return "sunny in " + city;
            },
            "get_weather",
            "The weather of a city today");

        // A 1x1 PNG.
        private static readonly byte[] TinyPng = Convert.FromBase64String(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==");
    }
}
