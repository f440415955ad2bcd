using System;
using System.Collections.Concurrent;
using System.Linq;
using System.Text.Json.Nodes;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Contextd.Client.Tests.Support
{
    /// <summary>
    /// An OpenAI-compatible chat-completions endpoint on 127.0.0.1, for a contextd started with
    /// <c>--provider openai</c>: it streams what a model that calls tools would. By the request:
    /// the last message a tool result: an answer quoting it; a user message with "weather" and a
    /// get_weather tool offered: a call of it; with "remember": a call of contextd's own
    /// memory_search; with "refuse": a 401 error; anything else: a short answer. Every stream ends
    /// with a usage chunk of <see cref="PromptTokens"/> and <see cref="CompletionTokens"/>.
    /// </summary>
    public sealed class FakeOpenAi : IAsyncDisposable
    {
        public const int PromptTokens = 31;
        public const int CompletionTokens = 7;
        public const string Answer = "Here is a short answer.";

        private readonly WebApplication _app;

        private FakeOpenAi(WebApplication app, string url)
        {
            _app = app;
            BaseUrl = url;
        }

        /// <summary>The base URL for <c>--provider-base-url</c>.</summary>
        public string BaseUrl { get; }

        /// <summary>Every request body received, in order.</summary>
        public ConcurrentQueue<JsonObject> Requests { get; } = new ConcurrentQueue<JsonObject>();

        /// <summary>
        /// The latest request whose last message has <paramref name="role"/> (and is
        /// <paramref name="text"/>, when given): contextd's own calls after a turn (memory
        /// extraction, summaries) come here too, quoting the turn.
        /// </summary>
        public JsonObject LastRequestEndingWith(string role, string? text = null) =>
            Requests.Reverse().First(r =>
            {
                var last = r["messages"]!.AsArray().Last()!;
                return (string)last["role"]! == role && (text == null || ContentText(last["content"]) == text);
            });

        public static async Task<FakeOpenAi> StartAsync()
        {
            var builder = WebApplication.CreateSlimBuilder();
            builder.Logging.ClearProviders();
            var app = builder.Build();
            app.Urls.Add("http://127.0.0.1:0");
            FakeOpenAi? fake = null;
            app.MapPost("/v1/chat/completions", context => fake!.AnswerAsync(context));
            await app.StartAsync().ConfigureAwait(false);
            var address = app.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()!.Addresses.Single();
            fake = new FakeOpenAi(app, address + "/v1");
            return fake;
        }

        private async Task AnswerAsync(HttpContext context)
        {
            var body = (JsonObject)(await JsonNode.ParseAsync(context.Request.Body).ConfigureAwait(false))!;
            Requests.Enqueue(body);
            var messages = body["messages"]!.AsArray();
            var last = messages[messages.Count - 1]!.AsObject();
            var role = (string)last["role"]!;
            var text = role == "user" ? ContentText(last["content"]) : "";
            var tools = body["tools"]?.AsArray().Select(t => (string)t!["function"]!["name"]!).ToList() ?? new();

            if (text.Contains("refuse"))
            {
                context.Response.StatusCode = 401;
                context.Response.ContentType = "application/json";
                var error = new JsonObject
                {
                    ["error"] = new JsonObject
                    {
                        ["message"] = "Incorrect API key provided",
                        ["type"] = "invalid_request_error",
                        ["code"] = "invalid_api_key",
                    },
                };
                await context.Response.WriteAsync(error.ToJsonString()).ConfigureAwait(false);
                return;
            }
            context.Response.ContentType = "text/event-stream";
            await SendAsync(context, Chunk(new JsonObject { ["role"] = "assistant", ["content"] = "" })).ConfigureAwait(false);
            string finish;
            if (role == "tool")
            {
                await SendAsync(context, Chunk(new JsonObject { ["content"] = "The tool said: " })).ConfigureAwait(false);
                await SendAsync(context, Chunk(new JsonObject { ["content"] = ContentText(last["content"]) })).ConfigureAwait(false);
                finish = "stop";
            }
            else if (text.Contains("weather") && tools.Contains("get_weather"))
            {
                await SendAsync(context, ToolCallChunk("call_weather_1", "get_weather", "{\"city\": \"Paris\"}")).ConfigureAwait(false);
                finish = "tool_calls";
            }
            else if (text.Contains("remember") && tools.Contains("memory_search"))
            {
                await SendAsync(context, ToolCallChunk("call_memory_1", "memory_search", "{\"query\": \"budget\"}")).ConfigureAwait(false);
                finish = "tool_calls";
            }
            else
            {
                await SendAsync(context, Chunk(new JsonObject { ["content"] = "Here is " })).ConfigureAwait(false);
                await SendAsync(context, Chunk(new JsonObject { ["content"] = "a short answer." })).ConfigureAwait(false);
                finish = "stop";
            }
            await SendAsync(context, Chunk(new JsonObject(), finish)).ConfigureAwait(false);
            var usage = Envelope(new JsonArray());
            usage["usage"] = new JsonObject
            {
                ["prompt_tokens"] = PromptTokens,
                ["completion_tokens"] = CompletionTokens,
                ["total_tokens"] = PromptTokens + CompletionTokens,
            };
            await SendAsync(context, usage).ConfigureAwait(false);
            await context.Response.WriteAsync("data: [DONE]\n\n").ConfigureAwait(false);
        }

        private static string ContentText(JsonNode? content) => content switch
        {
            null => "",
            JsonValue value => (string?)value ?? "",
            JsonArray parts => string.Concat(parts.Select(p => (string?)p?["text"] ?? "")),
            _ => "",
        };

        private static JsonObject ToolCallChunk(string id, string name, string arguments) => Chunk(new JsonObject
        {
            ["tool_calls"] = new JsonArray(new JsonObject
            {
                ["index"] = 0,
                ["id"] = id,
                ["type"] = "function",
                ["function"] = new JsonObject { ["name"] = name, ["arguments"] = arguments },
            }),
        });

        private static JsonObject Chunk(JsonObject delta, string? finishReason = null) =>
            Envelope(new JsonArray(new JsonObject
            {
                ["index"] = 0,
                ["delta"] = delta,
                ["logprobs"] = null,
                ["finish_reason"] = finishReason,
            }));

        private static JsonObject Envelope(JsonArray choices) => new JsonObject
        {
            ["id"] = "chatcmpl-fake",
            ["object"] = "chat.completion.chunk",
            ["created"] = 1_700_000_000,
            ["model"] = "fake-model",
            ["choices"] = choices,
            ["usage"] = null,
        };

        private static async Task SendAsync(HttpContext context, JsonObject chunk)
        {
            await context.Response.WriteAsync("data: " + chunk.ToJsonString() + "\n\n").ConfigureAwait(false);
            await context.Response.Body.FlushAsync().ConfigureAwait(false);
        }

        public async ValueTask DisposeAsync()
        {
            await _app.StopAsync().ConfigureAwait(false);
            await _app.DisposeAsync().ConfigureAwait(false);
        }
    }
}
