using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Net.Http;
using System.Text.Json;
using System.Threading;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Grpc.Core;
using Grpc.Net.Client;
using Microsoft.Extensions.AI;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary>
    /// The client in a host: dependency injection with options from configuration and the HTTP
    /// client factory's pipeline, logging, tracing continued by the server, and a channel or
    /// handler given to the client staying the host's.
    /// </summary>
    [Collection(LiveServers.Name)]
    public sealed class HostingTests
    {
        private readonly Servers _servers;

        public HostingTests(Servers servers) => _servers = servers;

        [Fact]
        public async Task AddContextdClient_binds_configuration_and_sends_through_the_factory_pipeline()
        {
            var user = _servers.NewUser("di");
            var configuration = new ConfigurationBuilder().AddInMemoryCollection(new Dictionary<string, string?>
            {
                ["Contextd:Address"] = _servers.Plain.Address,
                ["Contextd:Timeout"] = "00:00:20",
                ["Contextd:Headers:x-host-app"] = "tests",
            }).Build();
            var sent = new ConcurrentQueue<HttpRequestMessage>();
            var services = new ServiceCollection();
            services.AddContextdClient(configuration.GetSection("Contextd"))
                .AddHttpMessageHandler(() => new Recording(sent));
            ChatClientBuilder chatBuilder = services.AddContextdChatClient(o => o.UserId = user);
            Assert.NotNull(chatBuilder);

            using (var provider = services.BuildServiceProvider())
            {
                var client = provider.GetRequiredService<IContextdClient>();
                Assert.Same(client, provider.GetRequiredService<ContextdClient>());
                var counting = new CountTokensRequest { Tokenizer = "cl100k_base" };
                counting.Texts.Add("hello");
                Assert.Equal(1, (await client.CountTokensAsync(counting)).TotalTokens);

                var chat = provider.GetRequiredService<IChatClient>();
                var answer = await chat.GetResponseAsync("hello through the container");
                Assert.Contains("hello through the container", answer.Text);
            }

            // Both calls went through the pipeline, with the configured header.
            var paths = sent.Select(r => r.RequestUri!.AbsolutePath).ToList();
            Assert.Contains("/contextd.v1.ContextService/CountTokens", paths);
            Assert.Contains("/contextd.v1.ChatService/StreamChat", paths);
            Assert.All(sent, r => Assert.Equal("tests", r.Headers.GetValues("x-host-app").Single()));
        }

        [Fact]
        public void AddContextdClient_with_an_action_configures_the_options()
        {
            var services = new ServiceCollection();
            services.AddContextdClient(o =>
            {
                o.Address = _servers.Plain.WebAddress;
                o.UseGrpcWeb = true;
            });
            using var provider = services.BuildServiceProvider();
            var client = provider.GetRequiredService<ContextdClient>();
            Assert.Equal(_servers.Plain.WebAddress, client.Target);
        }

        [Fact]
        public async Task Calls_are_logged_at_debug_and_failures_at_warning_without_keys_or_message_text()
        {
            const string Secret = "my-secret-question-7f3a";
            var server = _servers.Keyed;
            var logs = new RecordingLoggerProvider();
            var services = new ServiceCollection();
            services.AddLogging(b => b.AddProvider(logs).SetMinimumLevel(LogLevel.Trace));
            services.AddContextdClient(o =>
            {
                o.Address = server.Server.Address;
                o.ApiKey = server.Alice;
            });
            using (var provider = services.BuildServiceProvider())
            {
                var client = provider.GetRequiredService<IContextdClient>();
                var session = (await client.CreateSessionAsync(new CreateSessionRequest())).Session;
                await client.RunChatTurnAsync(Requests.Turn("", Secret, session.Id), onEvent: null);
                await Assert.ThrowsAsync<ContextdException>(
                    () => client.GetSessionAsync(new GetSessionRequest { SessionId = "no-such-session" }));
                await Assert.ThrowsAsync<ContextdException>(
                    () => client.BuildMessagesAsync(new BuildMessagesRequest { UserMessage = Secret, TokenBudget = -1 }));
            }

            var ours = logs.Lines.Where(l => l.Category == ContextdDiagnostics.SourceName).ToList();
            Assert.Contains(ours, l => l.Level == LogLevel.Debug && l.Text.Contains("contextd.v1.SessionService/CreateSession returned"));
            Assert.Contains(ours, l => l.Level == LogLevel.Debug && l.Text.Contains("contextd.v1.ChatService/StreamChat returned"));
            Assert.Contains(ours, l => l.Level == LogLevel.Warning && l.Text.Contains("GetSession failed with NotFound"));
            Assert.Contains(ours, l => l.Level == LogLevel.Warning && l.Text.Contains("BuildMessages failed with InvalidArgument") && l.Text.Contains("token_budget"));
            // Neither the key nor the user's words, in any line of any category.
            Assert.DoesNotContain(logs.Lines, l => l.Text.Contains(server.Alice) || l.Text.Contains(Secret));
        }

        [Fact]
        public async Task The_server_continues_the_hosts_trace_under_the_clients_activity()
        {
            var server = _servers.Traced;
            var activities = new ConcurrentQueue<Activity>();
            using var host = new ActivitySource("Contextd.Client.Tests.Host");
            using var listener = new ActivityListener
            {
                ShouldListenTo = source => source.Name == ContextdDiagnostics.SourceName || source.Name == host.Name,
                Sample = (ref ActivityCreationOptions<ActivityContext> _) => ActivitySamplingResult.AllDataAndRecorded,
                ActivityStopped = activities.Enqueue,
            };
            ActivitySource.AddActivityListener(listener);
            using var client = Servers.Client(server, Transport.Grpc);
            var user = _servers.NewUser("trace");

            Activity parent;
            using (parent = host.StartActivity("add-in button")!)
            {
                await client.ListTokenizersAsync(new ListTokenizersRequest());
                await foreach (var _ in client.StreamChatAsync(Requests.Turn(user, "traced")))
                {
                }
                // The host's activity is current again after each call.
                Assert.Same(parent, Activity.Current);
            }

            var calls = activities.Where(a => a.Source.Name == ContextdDiagnostics.SourceName).ToList();
            Assert.Equal(new[] { "contextd.v1.ContextService/ListTokenizers", "contextd.v1.ChatService/StreamChat" }, calls.Select(a => a.DisplayName));
            foreach (var call in calls)
            {
                Assert.Equal(ActivityKind.Client, call.Kind);
                Assert.Equal(parent.SpanId, call.ParentSpanId);
                Assert.Equal("grpc", call.GetTagItem("rpc.system"));
                Assert.Equal(0, call.GetTagItem("rpc.grpc.status_code"));
                var span = await ServerSpan(server, call.DisplayName);
                Assert.Equal("0x" + parent.TraceId.ToHexString(), span.TraceId);
                Assert.Equal("0x" + call.SpanId.ToHexString(), span.ParentId);
            }
        }

        [Fact]
        public async Task A_handler_or_channel_given_to_the_client_stays_open_after_it()
        {
            var handler = new SocketsHttpHandler();
            var options = new ContextdClientOptions { HttpHandler = handler, UseGrpcWeb = true, GrpcWebAddress = _servers.Plain.WebAddress };
            using (var client = new ContextdClient(_servers.Plain.Address, options))
            {
                await client.ListTokenizersAsync(new ListTokenizersRequest());
            }
            using (var again = new ContextdClient(_servers.Plain.Address, options))
            {
                // The same handler, after the first client's Dispose: still usable.
                await again.ListTokenizersAsync(new ListTokenizersRequest());
            }
            handler.Dispose();

            using var channel = GrpcChannel.ForAddress("http://" + _servers.Plain.Address);
            using (var overChannel = new ContextdClient(channel))
            {
                await overChannel.ListTokenizersAsync(new ListTokenizersRequest());
            }
            var overInvoker = new ContextdClient(channel.CreateCallInvoker());
            await overInvoker.ListTokenizersAsync(new ListTokenizersRequest());

            // A generated client over the client's invoker gets its errors as ContextdException.
            var sessions = new SessionService.SessionServiceClient(overInvoker.CallInvoker);
            var error = await Assert.ThrowsAsync<ContextdException>(
                async () => await sessions.GetSessionAsync(new GetSessionRequest { UserId = "u", SessionId = "no-such-session" }));
            Assert.Equal(StatusCode.NotFound, error.StatusCode);
            Assert.Throws<ArgumentException>(() => new ContextdClient(channel, new ContextdClientOptions { ApiKey = "k" }));
        }

        private sealed record Span(string TraceId, string ParentId);

        // The console exporter prints each span as it ends, as an indented JSON object.
        private static async Task<Span> ServerSpan(ContextdServer server, string name)
        {
            var deadline = DateTime.UtcNow.AddSeconds(15);
            while (true)
            {
                foreach (var text in JsonObjects(server.Output))
                {
                    using var span = JsonDocument.Parse(text);
                    var root = span.RootElement;
                    if (root.GetProperty("name").GetString() == name)
                    {
                        return new Span(
                            root.GetProperty("context").GetProperty("trace_id").GetString()!,
                            root.GetProperty("parent_id").GetString() ?? "");
                    }
                }
                if (DateTime.UtcNow > deadline)
                {
                    throw new Xunit.Sdk.XunitException("the server printed no span " + name + ":\n" + server.Output);
                }
                await Task.Delay(50);
            }
        }

        private static IEnumerable<string> JsonObjects(string output)
        {
            var current = new List<string>();
            foreach (var line in output.Split('\n'))
            {
                if (line == "{")
                {
                    current.Clear();
                }
                current.Add(line);
                if (line == "}")
                {
                    yield return string.Join("\n", current);
                    current.Clear();
                }
            }
        }

        private sealed class Recording : DelegatingHandler
        {
            private readonly ConcurrentQueue<HttpRequestMessage> _sent;

            internal Recording(ConcurrentQueue<HttpRequestMessage> sent) => _sent = sent;

            protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken cancellationToken)
            {
                _sent.Enqueue(request);
                return base.SendAsync(request, cancellationToken);
            }
        }
    }
}
