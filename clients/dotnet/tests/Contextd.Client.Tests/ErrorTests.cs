using System;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Reflection;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Google.Protobuf.Reflection;
using Grpc.Core;
using Xunit;

namespace Contextd.Client.Tests
{
    [Collection(LiveServers.Name)]
    public sealed class ErrorTests
    {
        private readonly Servers _servers;

        public ErrorTests(Servers servers) => _servers = servers;

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task Invalid_argument_names_every_rejected_field(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var request = new BuildMessagesRequest { UserMessage = "hello", TokenBudget = -5 };
            request.History.Add(new Message { Role = Role.Assistant, ToolCalls = { new ToolCall { Id = "c1", Name = "bad name!" } } });

            var error = await Assert.ThrowsAsync<ContextdException>(() => client.BuildMessagesAsync(request));

            Assert.Equal(StatusCode.InvalidArgument, error.StatusCode);
            var fields = error.FieldViolations.Select(v => v.Field).ToList();
            Assert.Contains("token_budget", fields);
            Assert.Contains("history[0].tool_calls[0].name", fields);
            Assert.All(error.FieldViolations, v => Assert.NotEmpty(v.Description));
            Assert.Contains("token_budget: ", error.Message);
            Assert.IsType<RpcException>(error.InnerException);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task Other_statuses_carry_their_code_and_detail_and_no_violations(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser();

            var missing = await Assert.ThrowsAsync<ContextdException>(
                () => client.GetSessionAsync(new GetSessionRequest { UserId = user, SessionId = "no-such-session" }));
            Assert.Equal(StatusCode.NotFound, missing.StatusCode);
            Assert.NotEmpty(missing.Detail);
            Assert.Empty(missing.FieldViolations);

            // A stream refused before the turn starts throws from the enumeration.
            var refused = await Assert.ThrowsAsync<ContextdException>(async () =>
            {
                await foreach (var _ in client.StreamChatAsync(Requests.Turn(user, "hi", "no-such-session")))
                {
                }
            });
            Assert.Equal(StatusCode.NotFound, refused.StatusCode);
        }

        [Fact]
        public async Task A_stream_past_its_deadline_is_deadline_exceeded()
        {
            using var client = Servers.Client(_servers.Slow, Transport.Grpc, new ContextdClientOptions { StreamTimeout = TimeSpan.FromMilliseconds(300) });
            var message = string.Join(" ", Enumerable.Range(1, 60).Select(i => "word" + i));
            var error = await Assert.ThrowsAsync<ContextdException>(
                () => client.RunChatTurnAsync(Requests.Turn(_servers.NewUser(), message), onEvent: null));
            Assert.Equal(StatusCode.DeadlineExceeded, error.StatusCode);
            Assert.Contains("deadline of 0.3 s", error.Detail);
        }

        [Fact]
        public async Task A_unary_call_past_its_deadline_says_which_deadline()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc, new ContextdClientOptions { Timeout = TimeSpan.FromTicks(1) });
            var error = await Assert.ThrowsAsync<ContextdException>(() => client.ListTokenizersAsync(new ListTokenizersRequest()));
            Assert.Equal(StatusCode.DeadlineExceeded, error.StatusCode);
            Assert.Contains(_servers.Plain.Address, error.Detail);
            Assert.Contains("deadline of 1E-07 s", error.Detail);
        }

        [Fact]
        public async Task A_null_request_is_an_argument_null_exception_before_any_call()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc);
            var unary = await Assert.ThrowsAsync<ArgumentNullException>(() => client.CreateSessionAsync(null!));
            Assert.Equal("request", unary.ParamName);
            // Streams and lists refuse at the call, not at the first read.
            Assert.Equal("request", Assert.Throws<ArgumentNullException>(() => client.StreamChatAsync(null!)).ParamName);
            Assert.Equal("request", Assert.Throws<ArgumentNullException>(() => client.ExportEventsAsync(null!)).ParamName);
            Assert.Equal("request", Assert.Throws<ArgumentNullException>(() => client.GetSessionsAsync(null!)).ParamName);
            await Assert.ThrowsAsync<ArgumentNullException>(() => client.RunChatTurnAsync(null!, onEvent: null));
        }

        [Theory]
        [InlineData("localhost")]
        [InlineData("127.0.0.1")]
        [InlineData("[::1]")]
        public void A_host_without_a_port_is_refused_and_told_how(string address)
        {
            var error = Assert.Throws<ArgumentException>(() => new ContextdClient(address));
            Assert.Equal("address", error.ParamName);
            Assert.Contains("has no port", error.Message);
        }

        [Theory]
        [InlineData("http://localhost", 80)]
        [InlineData("https://contextd.example", 443)]
        [InlineData("localhost:50151", 50151)]
        [InlineData("[::1]:50151", 50151)]
        public void A_url_without_a_port_takes_its_schemes(string address, int port)
        {
            using var client = new ContextdClient(address);
            var metadata = (Microsoft.Extensions.AI.ChatClientMetadata)new ContextdChatClient(client).GetService(typeof(Microsoft.Extensions.AI.ChatClientMetadata))!;
            Assert.Equal(port, metadata.ProviderUri!.Port);
        }

        [Fact]
        public async Task A_server_that_is_not_there_is_unavailable()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var port = ((IPEndPoint)listener.LocalEndpoint).Port;
            listener.Stop();
            using var client = new ContextdClient("127.0.0.1:" + port);
            var error = await Assert.ThrowsAsync<ContextdException>(() => client.ListTokenizersAsync(new ListTokenizersRequest()));
            Assert.Equal(StatusCode.Unavailable, error.StatusCode);
            Assert.Contains("127.0.0.1:" + port, error.Message);
        }

        [Theory]
        [InlineData("")]
        [InlineData("   ")]
        [InlineData("ftp://127.0.0.1:50151")]
        [InlineData("http://")]
        public void A_bad_address_is_refused_at_once(string address)
        {
            var error = Assert.ThrowsAny<ArgumentException>(() => new ContextdClient(address));
            Assert.Equal("address", error.ParamName);
        }

        [Fact]
        public void The_client_has_a_method_for_every_rpc_of_the_protos()
        {
            // Every proto file's descriptor the library was generated with, new ones included.
            var files = typeof(ChatReflection).Assembly.GetTypes()
                .Where(t => t.Namespace == "Contextd.V1" && t.Name.EndsWith("Reflection", StringComparison.Ordinal))
                .Select(t => (FileDescriptor)t.GetProperty("Descriptor")!.GetValue(null)!)
                .ToList();
            var methods = typeof(ContextdClient).GetMethods(BindingFlags.Public | BindingFlags.Instance);
            var rpcs = files.SelectMany(f => f.Services).SelectMany(s => s.Methods).ToList();
            Assert.Contains(rpcs, r => r.Service.Name == "ChatService" && r.Name == "StreamChat");
            Assert.Contains(rpcs, r => r.Service.Name == "UserService" && r.Name == "DeleteUser");
            foreach (var rpc in rpcs)
            {
                var name = rpc.Name + "Async";
                var method = Assert.Single(methods, m => m.Name == name);
                Assert.Equal(rpc.InputType.ClrType, method.GetParameters()[0].ParameterType);
                var returned = method.ReturnType.GetGenericArguments().Single();
                Assert.Equal(rpc.OutputType.ClrType, returned);
            }
        }
    }
}
