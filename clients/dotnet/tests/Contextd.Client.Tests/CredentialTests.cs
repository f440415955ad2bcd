using System;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Grpc.Core;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary>API keys and token providers against a server started with <c>--auth api-key</c>, and TLS.</summary>
    [Collection(LiveServers.Name)]
    public sealed class CredentialTests
    {
        private readonly Servers _servers;

        public CredentialTests(Servers servers) => _servers = servers;

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task An_api_key_acts_as_its_user(Transport transport)
        {
            var keyed = _servers.Keyed;
            using var alice = Servers.Client(keyed.Server, transport, new ContextdClientOptions { ApiKey = keyed.Alice });

            // An empty user id means the key's own user.
            var created = await alice.CreateSessionAsync(new CreateSessionRequest { Title = "mine" });
            Assert.Equal("alice", created.Session.UserId);
            var turn = await alice.RunChatTurnAsync(Requests.Turn("", "hello", created.Session.Id), onEvent: null);
            Assert.Equal(TurnStatus.Ok, turn.Status);

            var other = await Assert.ThrowsAsync<ContextdException>(
                () => alice.ListSessionsAsync(new ListSessionsRequest { UserId = "bob" }));
            Assert.Equal(StatusCode.PermissionDenied, other.StatusCode);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task A_missing_or_unknown_key_is_unauthenticated(Transport transport)
        {
            var keyed = _servers.Keyed;
            using var anonymous = Servers.Client(keyed.Server, transport);
            var missing = await Assert.ThrowsAsync<ContextdException>(() => anonymous.ListSessionsAsync(new ListSessionsRequest()));
            Assert.Equal(StatusCode.Unauthenticated, missing.StatusCode);

            using var stranger = Servers.Client(keyed.Server, transport, new ContextdClientOptions { ApiKey = "ctxd_000000000000_" + new string('x', 43) });
            var unknown = await Assert.ThrowsAsync<ContextdException>(() => stranger.ListSessionsAsync(new ListSessionsRequest()));
            Assert.Equal(StatusCode.Unauthenticated, unknown.StatusCode);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task A_token_provider_is_asked_before_every_call(Transport transport)
        {
            var keyed = _servers.Keyed;
            var calls = 0;
            var options = new ContextdClientOptions
            {
                // The key changes between calls, as a refreshed SSO token would.
                TokenProvider = _ => Task.FromResult(Interlocked.Increment(ref calls) == 1 ? keyed.Alice : keyed.Bob),
            };
            using var client = Servers.Client(keyed.Server, transport, options);

            var first = await client.CreateSessionAsync(new CreateSessionRequest());
            var second = await client.CreateSessionAsync(new CreateSessionRequest());
            Assert.Equal("alice", first.Session.UserId);
            Assert.Equal("bob", second.Session.UserId);
            await client.RunChatTurnAsync(Requests.Turn("", "hello", second.Session.Id), onEvent: null);
            Assert.Equal(3, calls);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task A_throwing_token_provider_fails_the_call_at_once_with_its_error(Transport transport)
        {
            var keyed = _servers.Keyed;
            var options = new ContextdClientOptions
            {
                TokenProvider = _ => throw new InvalidOperationException("the SSO dialog was closed"),
            };
            using var client = Servers.Client(keyed.Server, transport, options);

            var watch = Stopwatch.StartNew();
            var unary = await Assert.ThrowsAsync<ContextdException>(() => client.ListSessionsAsync(new ListSessionsRequest()));
            var stream = await Assert.ThrowsAsync<ContextdException>(() => client.RunChatTurnAsync(Requests.Turn("", "hi"), onEvent: null));
            Assert.True(watch.Elapsed < TimeSpan.FromSeconds(5), "took " + watch.Elapsed);

            foreach (var error in new[] { unary, stream })
            {
                Assert.Equal(StatusCode.Unauthenticated, error.StatusCode);
                Assert.Contains("TokenProvider failed", error.Message);
                Assert.Contains("the SSO dialog was closed", error.Message);
                Assert.IsType<InvalidOperationException>(error.InnerException);
            }
        }

        [Fact]
        public async Task A_token_provider_that_returns_no_token_is_refused_by_the_client()
        {
            var keyed = _servers.Keyed;
            using var client = Servers.Client(keyed.Server, Transport.Grpc, new ContextdClientOptions
            {
                TokenProvider = _ => Task.FromResult("Bearer " + keyed.Alice),
            });
            var error = await Assert.ThrowsAsync<ContextdException>(() => client.ListSessionsAsync(new ListSessionsRequest()));
            Assert.Equal(StatusCode.Unauthenticated, error.StatusCode);
            Assert.Contains("without 'Bearer '", error.Message);
        }

        [Fact]
        public async Task A_token_provider_that_never_answers_is_cut_off_by_the_deadline()
        {
            var keyed = _servers.Keyed;
            using var client = Servers.Client(keyed.Server, Transport.Grpc, new ContextdClientOptions
            {
                Timeout = TimeSpan.FromMilliseconds(500),
                TokenProvider = async cancel =>
                {
                    await Task.Delay(Timeout.Infinite, cancel);
                    return keyed.Alice;
                },
            });
            var watch = Stopwatch.StartNew();
            var error = await Assert.ThrowsAsync<ContextdException>(() => client.ListSessionsAsync(new ListSessionsRequest()));
            Assert.Equal(StatusCode.DeadlineExceeded, error.StatusCode);
            Assert.True(watch.Elapsed < TimeSpan.FromSeconds(5), "took " + watch.Elapsed);
        }

        [Theory]
        [InlineData("")]
        [InlineData("Bearer ctxd_abc")]
        [InlineData("two words")]
        public void A_malformed_key_is_refused_by_the_constructor(string key)
        {
            var error = Assert.Throws<ArgumentException>(() => new ContextdClient("127.0.0.1:1", new ContextdClientOptions { ApiKey = key }));
            Assert.Contains("ApiKey", error.Message);
        }

        [Fact]
        public void A_key_and_a_token_provider_together_are_refused()
        {
            var options = new ContextdClientOptions { ApiKey = "ctxd_abc", TokenProvider = _ => Task.FromResult("t") };
            var error = Assert.Throws<ArgumentException>(() => new ContextdClient("127.0.0.1:1", options));
            Assert.Contains("not both", error.Message);
        }

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task Tls_with_the_servers_authority_trusted(Transport transport)
        {
            var tls = _servers.Tls;
            var options = new ContextdClientOptions { ApiKey = tls.Key, HttpHandler = tls.Certificates.TrustingHandler() };
            if (transport != Transport.Grpc)
            {
                options.UseGrpcWeb = true;
                options.GrpcWebAddress = "https://" + tls.Server.WebAddress;
                options.GrpcWebMode = transport == Transport.GrpcWeb ? Grpc.Net.Client.Web.GrpcWebMode.GrpcWeb : Grpc.Net.Client.Web.GrpcWebMode.GrpcWebText;
            }
            using var client = new ContextdClient("https://" + tls.Server.Address, options);

            var created = await client.CreateSessionAsync(new CreateSessionRequest());
            Assert.Equal("alice", created.Session.UserId);
            var events = 0;
            var turn = await client.RunChatTurnAsync(Requests.Turn("", "over TLS", created.Session.Id), _ => events++);
            Assert.Equal(TurnStatus.Ok, turn.Status);
            Assert.True(events > 3);
        }

        [Fact]
        public async Task Tls_with_an_untrusted_certificate_fails_to_connect()
        {
            var tls = _servers.Tls;
            using var client = new ContextdClient("https://" + tls.Server.Address, new ContextdClientOptions { ApiKey = tls.Key });
            var error = await Assert.ThrowsAsync<ContextdException>(() => client.ListTokenizersAsync(new ListTokenizersRequest()));
            Assert.Contains("The SSL connection could not be established", error.Detail);
            Assert.Contains("The remote certificate is invalid", error.Detail);
        }
    }
}
