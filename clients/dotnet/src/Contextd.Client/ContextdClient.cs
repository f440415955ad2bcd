using System;
using System.Collections.Generic;
using System.Net;
using System.Net.Http;
using System.Runtime.CompilerServices;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;
using Google.Protobuf.Collections;
using Grpc.Core;
using Grpc.Core.Interceptors;
using Grpc.Net.Client;
using Grpc.Net.Client.Web;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Contextd.Client
{
    /// <summary>
    /// One connection to a contextd server, with a Task-returning method per RPC.
    /// Thread-safe; create one per add-in (or take it from dependency injection) and dispose
    /// it on shutdown. It disposes only what it made: a channel or handler given to it stays
    /// the giver's.
    /// </summary>
    public sealed class ContextdClient : IContextdClient, IDisposable
    {
        private readonly GrpcChannel? _ownedChannel;
        private readonly ContextdClientOptions _options;
        private readonly ContextService.ContextServiceClient _context;
        private readonly SessionService.SessionServiceClient _sessions;
        private readonly MemoryService.MemoryServiceClient _memory;
        private readonly PromptService.PromptServiceClient _prompts;
        private readonly ChatService.ChatServiceClient _chat;
        private readonly UserService.UserServiceClient _users;

        /// <summary>
        /// Connects to <paramref name="address"/>: <c>host:port</c>, or a full <c>http://</c> /
        /// <c>https://</c> URL (whose port, when left out, is the scheme's: 80 or 443). A host
        /// without a port and without a scheme is refused. The connection opens on the first call.
        /// </summary>
        public ContextdClient(string address, ContextdClientOptions? options = null)
            : this(Connection.Open(address, nameof(address), options ?? new ContextdClientOptions(), null))
        {
        }

        /// <summary>Connects to <see cref="ContextdClientOptions.Address"/>.</summary>
        public ContextdClient(ContextdClientOptions options)
            : this(Connection.Open(
                (options ?? throw new ArgumentNullException(nameof(options))).Address ?? "",
                "options.Address",
                options,
                null))
        {
        }

        /// <summary>
        /// Calls through a channel the host built and keeps (its handler, credentials and
        /// limits); disposing this client leaves the channel open. Of
        /// <paramref name="options"/> only the deadlines, headers and logger apply.
        /// </summary>
        public ContextdClient(GrpcChannel channel, ContextdClientOptions? options = null)
            : this(Connection.Over(
                (channel ?? throw new ArgumentNullException(nameof(channel))).CreateCallInvoker(),
                channel.Target,
                options))
        {
        }

        /// <summary>
        /// Calls through <paramref name="callInvoker"/> (a test double, or an invoker with the
        /// host's own interceptors). Of <paramref name="options"/> only the deadlines, headers,
        /// logger and <see cref="ContextdClientOptions.Address"/> (named in error messages) apply.
        /// </summary>
        public ContextdClient(CallInvoker callInvoker, ContextdClientOptions? options = null)
            : this(Connection.Over(
                callInvoker ?? throw new ArgumentNullException(nameof(callInvoker)),
                options?.Address ?? "the server of the given CallInvoker",
                options))
        {
        }

        /// <summary>Through <paramref name="handler"/>, which the caller owns (the HTTP client factory's pipeline).</summary>
        internal ContextdClient(ContextdClientOptions options, HttpMessageHandler handler, ILoggerFactory? loggerFactory)
            : this(Connection.Open(options.Address ?? "", "Address", options, handler), loggerFactory)
        {
        }

        private ContextdClient(Connection connection, ILoggerFactory? loggerFactory = null)
        {
            _options = connection.Options;
            _ownedChannel = connection.OwnedChannel;
            Target = connection.Target;
            Address = connection.Address;
            var logger = (loggerFactory ?? _options.LoggerFactory ?? NullLoggerFactory.Instance).CreateLogger(ContextdDiagnostics.SourceName);
            CallInvoker = connection.Invoker.Intercept(new ContextdInterceptor(logger, Target, _options));
            _context = new ContextService.ContextServiceClient(CallInvoker);
            _sessions = new SessionService.SessionServiceClient(CallInvoker);
            _memory = new MemoryService.MemoryServiceClient(CallInvoker);
            _prompts = new PromptService.PromptServiceClient(CallInvoker);
            _chat = new ChatService.ChatServiceClient(CallInvoker);
            _users = new UserService.UserServiceClient(CallInvoker);
        }

        /// <summary>The address calls go to (the gRPC-Web one when that is in use).</summary>
        public string Target { get; }

        /// <summary>That address as a URL; null for a client over a given channel or invoker.</summary>
        internal Uri? Address { get; }

        /// <summary>
        /// The invoker this client calls through, with its logging, tracing and errors: a
        /// generated client made over it (<c>new ChatService.ChatServiceClient(client.CallInvoker)</c>)
        /// throws <see cref="ContextdException"/> too.
        /// </summary>
        public CallInvoker CallInvoker { get; }

        // ContextService

        /// <inheritdoc />
        public Task<AssemblePromptResponse> AssemblePromptAsync(AssemblePromptRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.AssemblePromptAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<BuildMessagesResponse> BuildMessagesAsync(BuildMessagesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.BuildMessagesAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<CollectResponse> CollectAsync(CollectRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.CollectAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<CountTokensResponse> CountTokensAsync(CountTokensRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.CountTokensAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListTokenizersResponse> ListTokenizersAsync(ListTokenizersRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.ListTokenizersAsync(Required(request), Unary(cancellationToken)));

        // SessionService

        /// <inheritdoc />
        public Task<CreateSessionResponse> CreateSessionAsync(CreateSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.CreateSessionAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<GetSessionResponse> GetSessionAsync(GetSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.GetSessionAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListSessionsResponse> ListSessionsAsync(ListSessionsRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.ListSessionsAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<DeleteSessionResponse> DeleteSessionAsync(DeleteSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.DeleteSessionAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<AppendMessagesResponse> AppendMessagesAsync(AppendMessagesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.AppendMessagesAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListMessagesResponse> ListMessagesAsync(ListMessagesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.ListMessagesAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<AddCompressionSummaryResponse> AddCompressionSummaryAsync(AddCompressionSummaryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.AddCompressionSummaryAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<SetSessionSummaryResponse> SetSessionSummaryAsync(SetSessionSummaryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.SetSessionSummaryAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<EndSessionResponse> EndSessionAsync(EndSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.EndSessionAsync(Required(request), Unary(cancellationToken)));

        // MemoryService

        /// <inheritdoc />
        public Task<AddMemoryResponse> AddMemoryAsync(AddMemoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.AddMemoryAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<SearchMemoriesResponse> SearchMemoriesAsync(SearchMemoriesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.SearchMemoriesAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListMemoriesResponse> ListMemoriesAsync(ListMemoriesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.ListMemoriesAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<DeleteMemoryResponse> DeleteMemoryAsync(DeleteMemoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.DeleteMemoryAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<UpdateMemoryResponse> UpdateMemoryAsync(UpdateMemoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.UpdateMemoryAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListMemoryHistoryResponse> ListMemoryHistoryAsync(ListMemoryHistoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.ListMemoryHistoryAsync(Required(request), Unary(cancellationToken)));

        // PromptService

        /// <inheritdoc />
        public Task<UpsertTemplateResponse> UpsertTemplateAsync(UpsertTemplateRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.UpsertTemplateAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListTemplatesResponse> ListTemplatesAsync(ListTemplatesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.ListTemplatesAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<DeleteTemplateResponse> DeleteTemplateAsync(DeleteTemplateRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.DeleteTemplateAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<UpsertSkillResponse> UpsertSkillAsync(UpsertSkillRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.UpsertSkillAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<ListSkillsResponse> ListSkillsAsync(ListSkillsRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.ListSkillsAsync(Required(request), Unary(cancellationToken)));

        /// <inheritdoc />
        public Task<DeleteSkillResponse> DeleteSkillAsync(DeleteSkillRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.DeleteSkillAsync(Required(request), Unary(cancellationToken)));

        // UserService

        /// <inheritdoc />
        public Task<DeleteUserResponse> DeleteUserAsync(DeleteUserRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_users.DeleteUserAsync(Required(request), Unary(cancellationToken)));

        // Streams

        /// <inheritdoc />
        public IAsyncEnumerable<ExportEventsResponse> ExportEventsAsync(ExportEventsRequest request, CancellationToken cancellationToken = default)
        {
            Required(request);
            return ReadAllAsync(callOptions => _sessions.ExportEvents(request, callOptions), cancellationToken);
        }

        /// <inheritdoc />
        public async Task<IReadOnlyList<ExportEventsResponse>> ExportEventsListAsync(ExportEventsRequest request, CancellationToken cancellationToken = default)
        {
            var events = new List<ExportEventsResponse>();
            await foreach (var item in ExportEventsAsync(request, cancellationToken).ConfigureAwait(false))
            {
                events.Add(item);
            }
            return events;
        }

        /// <inheritdoc />
        public IAsyncEnumerable<StreamChatResponse> StreamChatAsync(StreamChatRequest request, CancellationToken cancellationToken = default)
        {
            Required(request);
            return ReadAllAsync(callOptions => _chat.StreamChat(request, callOptions), cancellationToken);
        }

        /// <inheritdoc />
        public Task<TurnCompleted> RunChatTurnAsync(StreamChatRequest request, Action<StreamChatResponse>? onEvent, CancellationToken cancellationToken = default) =>
            TurnAsync(StreamChatAsync(request, cancellationToken), onEvent);

        /// <inheritdoc />
        public Task<TurnCompleted> RunChatTurnAsync(StreamChatRequest request, IProgress<StreamChatResponse>? progress, CancellationToken cancellationToken = default) =>
            TurnAsync(StreamChatAsync(request, cancellationToken), progress == null ? null : new Action<StreamChatResponse>(progress.Report));

        // Every page of a list

        /// <inheritdoc />
        public ContextdPageable<Session> GetSessionsAsync(ListSessionsRequest request, CancellationToken cancellationToken = default) =>
            Pages(Required(request), (r, token) => r.PageToken = token, ListSessionsAsync, r => r.Sessions, r => r.NextPageToken, cancellationToken);

        /// <inheritdoc />
        public ContextdPageable<SessionMessage> GetMessagesAsync(ListMessagesRequest request, CancellationToken cancellationToken = default) =>
            Pages(Required(request), (r, token) => r.PageToken = token, ListMessagesAsync, r => r.Messages, r => r.NextPageToken, cancellationToken);

        /// <inheritdoc />
        public ContextdPageable<Memory> GetMemoriesAsync(ListMemoriesRequest request, CancellationToken cancellationToken = default) =>
            Pages(Required(request), (r, token) => r.PageToken = token, ListMemoriesAsync, r => r.Memories, r => r.NextPageToken, cancellationToken);

        /// <inheritdoc />
        public ContextdPageable<MemoryChange> GetMemoryHistoryAsync(ListMemoryHistoryRequest request, CancellationToken cancellationToken = default) =>
            Pages(Required(request), (r, token) => r.PageToken = token, ListMemoryHistoryAsync, r => r.Changes, r => r.NextPageToken, cancellationToken);

        /// <summary>Closes the connection the client opened (calls in flight are cancelled); a channel or handler it was given stays open.</summary>
        public void Dispose() => _ownedChannel?.Dispose();

        private static T Required<T>(T request)
            where T : class =>
            request ?? throw new ArgumentNullException(nameof(request));

        private CallOptions Unary(CancellationToken cancellationToken) =>
            CallOptionsWith(_options.Timeout, cancellationToken);

        private CallOptions Streaming(CancellationToken cancellationToken) =>
            CallOptionsWith(_options.StreamTimeout, cancellationToken);

        private CallOptions CallOptionsWith(TimeSpan? timeout, CancellationToken cancellationToken)
        {
            Metadata? headers = null;
            if (_options.Headers.Count > 0)
            {
                headers = new Metadata();
                foreach (var pair in _options.Headers)
                {
                    headers.Add(pair.Key, pair.Value);
                }
            }
            DateTime? deadline = timeout.HasValue ? DateTime.UtcNow.Add(timeout.Value) : (DateTime?)null;
            return new CallOptions(headers: headers, deadline: deadline, cancellationToken: cancellationToken);
        }

        // Errors become ContextdException in the interceptor; this only awaits and releases the call.
        private static async Task<TResponse> UnaryAsync<TResponse>(AsyncUnaryCall<TResponse> call)
        {
            using (call)
            {
                return await call.ResponseAsync.ConfigureAwait(false);
            }
        }

        // The call starts when enumeration does, so its deadline counts from the first read
        // and a stream nobody enumerates opens no call.
        private async IAsyncEnumerable<TResponse> ReadAllAsync<TResponse>(
            Func<CallOptions, AsyncServerStreamingCall<TResponse>> start,
            [EnumeratorCancellation] CancellationToken cancellationToken = default)
        {
            using (var call = start(Streaming(cancellationToken)))
            {
                while (await call.ResponseStream.MoveNext(cancellationToken).ConfigureAwait(false))
                {
                    yield return call.ResponseStream.Current;
                }
            }
        }

        private static async Task<TurnCompleted> TurnAsync(IAsyncEnumerable<StreamChatResponse> events, Action<StreamChatResponse>? onEvent)
        {
            TurnCompleted? completed = null;
            await foreach (var item in events.ConfigureAwait(false))
            {
                onEvent?.Invoke(item);
                if (item.EventCase == StreamChatResponse.EventOneofCase.TurnCompleted)
                {
                    completed = item.TurnCompleted;
                }
            }
            return completed ?? throw ContextdException.Protocol("the chat stream ended without a TurnCompleted event");
        }

        private static ContextdPageable<TItem> Pages<TRequest, TResponse, TItem>(
            TRequest request,
            Action<TRequest, string> setPageToken,
            Func<TRequest, CancellationToken, Task<TResponse>> list,
            Func<TResponse, RepeatedField<TItem>> items,
            Func<TResponse, string> nextPageToken,
            CancellationToken cancellationToken)
            where TRequest : class, Google.Protobuf.IDeepCloneable<TRequest>
        {
            // A copy per page: the caller's request is never changed.
            var first = request.Clone();
            return new ContextdPageable<TItem>(
                async (token, cancel) =>
                {
                    var page = first.Clone();
                    if (token != null)
                    {
                        setPageToken(page, token);
                    }
                    var response = await list(page, cancel).ConfigureAwait(false);
                    return new ContextdPage<TItem>(items(response), nextPageToken(response));
                },
                cancellationToken);
        }

        /// <summary>What a constructor connects through, and what of it the client owns.</summary>
        private sealed class Connection
        {
            private static readonly Regex HostAndPort = new Regex(@"^(\[[0-9A-Fa-f:.]+\]|[^:/\[\]]+):\d+$", RegexOptions.CultureInvariant);

            private Connection(CallInvoker invoker, string target, GrpcChannel? ownedChannel, ContextdClientOptions options, Uri? address = null)
            {
                Address = address;
                Invoker = invoker;
                Target = target;
                OwnedChannel = ownedChannel;
                Options = options;
            }

            internal CallInvoker Invoker { get; }

            internal string Target { get; }

            internal GrpcChannel? OwnedChannel { get; }

            internal Uri? Address { get; }

            internal ContextdClientOptions Options { get; }

            /// <summary>A channel of the client's own, through <paramref name="handler"/> when given (not owned).</summary>
            internal static Connection Open(string address, string parameter, ContextdClientOptions options, HttpMessageHandler? handler)
            {
                if (string.IsNullOrWhiteSpace(address))
                {
                    throw new ArgumentException("an address is required, for example 127.0.0.1:50151", parameter);
                }
                var url = options.UseGrpcWeb && !string.IsNullOrWhiteSpace(options.GrpcWebAddress)
                    ? ParseAddress(options.GrpcWebAddress!, "options.GrpcWebAddress")
                    : ParseAddress(address, parameter);
                var channel = OpenChannel(url, options, handler ?? options.HttpHandler);
                return new Connection(channel.CreateCallInvoker(), channel.Target, channel, options, url);
            }

            /// <summary>Calls through an invoker the caller owns; credentials and transport are its.</summary>
            internal static Connection Over(CallInvoker invoker, string target, ContextdClientOptions? options)
            {
                options ??= new ContextdClientOptions();
                if (options.ApiKey != null || options.TokenProvider != null || options.HttpHandler != null || options.UseGrpcWeb)
                {
                    throw new ArgumentException(
                        "ApiKey, TokenProvider, HttpHandler and UseGrpcWeb belong to the channel: set them on the GrpcChannel (or CallInvoker) given",
                        nameof(options));
                }
                return new Connection(invoker, target, null, options);
            }

            // The channel disposes only a handler it made; one the caller gave stays the caller's.
            private static GrpcChannel OpenChannel(Uri address, ContextdClientOptions options, HttpMessageHandler? given)
            {
                var channelOptions = new GrpcChannelOptions
                {
                    MaxReceiveMessageSize = options.MaxReceiveMessageSize,
                    // A cancelled token surfaces as OperationCanceledException, as .NET callers expect.
                    ThrowOperationCanceledOnCancellation = true,
                    DisposeHttpClient = false,
                };
                if (options.UseGrpcWeb)
                {
                    // A GrpcWebHandler disposes its inner handler with it: only ours is disposed.
                    channelOptions.HttpHandler = new GrpcWebHandler(options.GrpcWebMode, given ?? new HttpClientHandler());
                    channelOptions.DisposeHttpClient = given == null;
                    channelOptions.HttpVersion = HttpVersion.Version11;
#if NET5_0_OR_GREATER
                    channelOptions.HttpVersionPolicy = HttpVersionPolicy.RequestVersionExact;
#endif
                }
                else if (given != null)
                {
                    channelOptions.HttpHandler = given;
                }
                BearerCredentials.Apply(options, address, channelOptions);
                return GrpcChannel.ForAddress(address, channelOptions);
            }

            // contextd's own tools print host:port; the .NET channel needs a URL. A host without
            // a port would silently be port 80, which contextd never listens on by default.
            private static Uri ParseAddress(string address, string parameter)
            {
                var hasScheme = address.Contains("://");
                if (!hasScheme && !HostAndPort.IsMatch(address))
                {
                    throw new ArgumentException(
                        "'" + address + "' has no port: give host:port (for example localhost:50151) or a URL "
                        + "(http://localhost:50151; a URL without a port means its scheme's, 80 or 443)",
                        parameter);
                }
                var url = hasScheme ? address : "http://" + address;
                if (!Uri.TryCreate(url, UriKind.Absolute, out var parsed)
                    || (parsed.Scheme != Uri.UriSchemeHttp && parsed.Scheme != Uri.UriSchemeHttps)
                    || parsed.Host.Length == 0)
                {
                    throw new ArgumentException(
                        "'" + address + "' is not an address: give host:port (127.0.0.1:50151) or an http:// or https:// URL",
                        parameter);
                }
                return parsed;
            }
        }
    }
}
