using System;
using System.Collections.Generic;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Grpc.Net.Client.Web;
using Microsoft.Extensions.Logging;

namespace Contextd.Client
{
    /// <summary>
    /// How a <see cref="ContextdClient"/> reaches the server. Every property has a usable default,
    /// so <c>New ContextdClientOptions()</c> talks plain gRPC (HTTP/2) to the given address.
    /// </summary>
    public sealed class ContextdClientOptions
    {
        /// <summary>
        /// The server's address (<c>host:port</c> or an <c>http://</c> / <c>https://</c> URL), for
        /// <c>AddContextdClient</c> and configuration files (<c>"Contextd": { "Address": ... }</c>);
        /// a constructor's <c>address</c> argument takes its place.
        /// </summary>
        public string? Address { get; set; }

        /// <summary>
        /// Talk gRPC-Web over HTTP/1.1 instead of gRPC over HTTP/2.
        /// Needed on .NET Framework 4.8 (VSTO and COM add-ins), whose HTTP stack cannot carry
        /// HTTP/2 gRPC. contextd serves gRPC-Web on its own port, so set
        /// <see cref="GrpcWebAddress"/> to that port's address.
        /// </summary>
        public bool UseGrpcWeb { get; set; }

        /// <summary>
        /// The server's gRPC-Web address, for example <c>http://127.0.0.1:50152</c>, used when
        /// <see cref="UseGrpcWeb"/> is set. Empty means the address given to the client.
        /// </summary>
        public string? GrpcWebAddress { get; set; }

        /// <summary>
        /// The gRPC-Web wire format. <see cref="GrpcWebMode.GrpcWebText"/> (base64, the default)
        /// streams through every proxy; <see cref="GrpcWebMode.GrpcWeb"/> (binary) is about a
        /// quarter smaller on the wire.
        /// </summary>
        public GrpcWebMode GrpcWebMode { get; set; } = GrpcWebMode.GrpcWebText;

        /// <summary>
        /// Deadline of each unary call; <c>Nothing</c> for none. Default 30 seconds.
        /// </summary>
        public TimeSpan? Timeout { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>
        /// Deadline of a whole streamed call (a chat turn, an event export); <c>Nothing</c> for
        /// none. Default 5 minutes: a turn may call the model several times.
        /// </summary>
        public TimeSpan? StreamTimeout { get; set; } = TimeSpan.FromMinutes(5);

        /// <summary>
        /// Largest message accepted from the server. Default 16 MiB, the server's own default
        /// limit (a long session's BuildMessages answer can exceed gRPC's 4 MiB default).
        /// </summary>
        public int MaxReceiveMessageSize { get; set; } = 16 * 1024 * 1024;

        /// <summary>
        /// Headers sent with every call, for a proxy in front of contextd. Keys must be lowercase.
        /// The credential goes in <see cref="ApiKey"/> or <see cref="TokenProvider"/>, not here.
        /// </summary>
        public IDictionary<string, string> Headers { get; } = new Dictionary<string, string>();

        /// <summary>
        /// The HTTP handler to send through (a proxy, client certificates, a test server);
        /// <c>Nothing</c> for the platform default. The client never disposes a handler it is
        /// given: the giver does, after the client.
        /// </summary>
        public HttpMessageHandler? HttpHandler { get; set; }

        /// <summary>
        /// An API key (<c>contextd keys create</c>) for a server started with <c>--auth api-key</c>,
        /// sent as <c>authorization: Bearer</c> with every call. Read it from the environment or a
        /// secret store. Give this or <see cref="TokenProvider"/>, not both.
        /// </summary>
        public string? ApiKey { get; set; }

        /// <summary>
        /// Returns the current token (for example an Office SSO access token, for a server started
        /// with <c>--auth jwt</c>), asked before every call so a refreshed token is used at once;
        /// cache it inside if fetching is slow. Sent as <c>authorization: Bearer</c>.
        /// </summary>
        public Func<CancellationToken, Task<string>>? TokenProvider { get; set; }

        /// <summary>
        /// Where the client logs its calls (category <c>Contextd.Client</c>): Debug when a call
        /// starts and ends, Warning when it fails, with the method, the status code and the
        /// rejected fields, never a credential or a message's text. <c>AddContextdClient</c>
        /// sets it from the container; <c>Nothing</c> logs nothing.
        /// </summary>
        public ILoggerFactory? LoggerFactory { get; set; }
    }
}
