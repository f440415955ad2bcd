using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    /// <summary>The live servers of the tests, each started on first use and stopped after the last test.</summary>
    public sealed class Servers : IDisposable
    {
        private readonly List<IDisposable> _started = new List<IDisposable>();
        private readonly Lazy<ContextdServer> _plain;
        private readonly Lazy<ContextdServer> _slow;
        private readonly Lazy<KeyedServer> _keyed;
        private readonly Lazy<TlsServer> _tls;
        private readonly Lazy<ModelServer> _model;
        private readonly Lazy<ContextdServer> _traced;
        private int _users;

        public Servers()
        {
            _plain = Lazily(() => ContextdServer.Start(Array.Empty<string>()));
            // An echo answer streams one chunk per SlowDelayMs, so that a turn can be cancelled midway.
            _slow = Lazily(() => ContextdServer.Start(new[] { "--echo-delay-ms", SlowDelayMs.ToString() }));
            // Spans on standard output, each as it ends.
            _traced = Lazily(() => ContextdServer.Start(
                Array.Empty<string>(),
                new Dictionary<string, string> { ["OTEL_TRACES_EXPORTER"] = "console", ["OTEL_SERVICE_NAME"] = "contextd" }));
            _keyed = Lazily(() =>
            {
                string alice = "", bob = "";
                var server = ContextdServer.Start(
                    new[] { "--auth", "api-key" },
                    prepare: dir =>
                    {
                        alice = ContextdServer.CreateKey(dir, "alice");
                        bob = ContextdServer.CreateKey(dir, "bob");
                    });
                return new KeyedServer(server, alice, bob);
            });
            _tls = Lazily(() =>
            {
                var certificates = TestCertificates.Create(Path.Combine(Path.GetTempPath(), "contextd-dotnet-tls-" + Guid.NewGuid().ToString("N")));
                string key = "";
                var server = ContextdServer.Start(
                    new[] { "--auth", "api-key", "--tls-cert", certificates.CertificateFile, "--tls-key", certificates.KeyFile },
                    prepare: dir => key = ContextdServer.CreateKey(dir, "alice"));
                return new TlsServer(server, certificates, key);
            });
            _model = Lazily(() =>
            {
                var fake = FakeOpenAi.StartAsync().GetAwaiter().GetResult();
                try
                {
                    var server = ContextdServer.Start(
                        new[]
                        {
                            "--provider", "openai", "--provider-base-url", fake.BaseUrl,
                            "--provider-model", "fake-model", "--provider-timeout", "10",
                        },
                        new Dictionary<string, string> { ["CONTEXTD_OPENAI_API_KEY"] = "sk-fake" });
                    return new ModelServer(server, fake);
                }
                catch
                {
                    fake.DisposeAsync().AsTask().GetAwaiter().GetResult();
                    throw;
                }
            });
            // The runner may end without disposing fixtures (a crash, a cancelled run): no server outlives it.
            AppDomain.CurrentDomain.ProcessExit += (_, _) => Dispose();
        }

        public const int SlowDelayMs = 100;

        /// <summary>Echo provider, gRPC and gRPC-Web, no credentials.</summary>
        public ContextdServer Plain => _plain.Value;

        /// <summary>As <see cref="Plain"/>, with the echo answer streamed slowly.</summary>
        public ContextdServer Slow => _slow.Value;

        /// <summary>As <see cref="Plain"/>, printing its spans (OpenTelemetry's console exporter).</summary>
        public ContextdServer Traced => _traced.Value;

        /// <summary><c>--auth api-key</c>, with keys of alice and bob.</summary>
        public KeyedServer Keyed => _keyed.Value;

        /// <summary>TLS on both ports with a certificate of a test authority, and <c>--auth api-key</c>.</summary>
        public TlsServer Tls => _tls.Value;

        /// <summary>The openai provider, talking to <see cref="FakeOpenAi"/>: a model that calls tools.</summary>
        public ModelServer Model => _model.Value;

        /// <summary>A user id no other test uses, so tests never see each other's sessions.</summary>
        public string NewUser(string prefix = "user") => prefix + "-" + Interlocked.Increment(ref _users) + "-" + Guid.NewGuid().ToString("N").Substring(0, 6);

        /// <summary>A client of <paramref name="server"/> over <paramref name="transport"/>.</summary>
        public static ContextdClient Client(ContextdServer server, Transport transport, ContextdClientOptions? options = null)
        {
            options ??= new ContextdClientOptions();
            switch (transport)
            {
                case Transport.Grpc:
                    return new ContextdClient(server.Address, options);
                default:
                    options.UseGrpcWeb = true;
                    options.GrpcWebAddress = server.WebAddress;
                    options.GrpcWebMode = transport == Transport.GrpcWebText
                        ? Grpc.Net.Client.Web.GrpcWebMode.GrpcWebText
                        : Grpc.Net.Client.Web.GrpcWebMode.GrpcWeb;
                    return new ContextdClient(server.Address, options);
            }
        }

        private Lazy<T> Lazily<T>(Func<T> start) where T : IDisposable =>
            new Lazy<T>(() =>
            {
                var value = start();
                lock (_started)
                {
                    _started.Add(value);
                }
                return value;
            }, LazyThreadSafetyMode.ExecutionAndPublication);

        public void Dispose()
        {
            lock (_started)
            {
                foreach (var server in _started)
                {
                    server.Dispose();
                }
                _started.Clear();
            }
        }
    }

    internal static class Requests
    {
        internal static StreamChatRequest Turn(string user, string message, string sessionId = "") => new StreamChatRequest
        {
            Session = new SessionContext { UserId = user, SessionId = sessionId },
            UserMessage = message,
        };
    }
}
