using System;
using System.Collections.Generic;
using System.Net;
using System.Net.Http;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;
using Grpc.Core;
using Grpc.Net.Client;
using Grpc.Net.Client.Web;

namespace Contextd.Client
{
    /// <summary>
    /// One connection to a contextd server, with a Task-returning method per RPC.
    /// Thread-safe; create one per add-in and dispose it on shutdown.
    /// Every failed call throws <see cref="ContextdException"/>; a cancelled token throws
    /// <see cref="OperationCanceledException"/>.
    /// </summary>
    public sealed class ContextdClient : IDisposable
    {
        private readonly GrpcChannel _channel;
        private readonly ContextdClientOptions _options;
        private readonly ContextService.ContextServiceClient _context;
        private readonly SessionService.SessionServiceClient _sessions;
        private readonly MemoryService.MemoryServiceClient _memory;
        private readonly PromptService.PromptServiceClient _prompts;
        private readonly ChatService.ChatServiceClient _chat;
        private readonly UserService.UserServiceClient _users;

        /// <summary>
        /// Connects to <paramref name="address"/> (<c>host:port</c> or a full
        /// <c>http://</c> / <c>https://</c> URL). The connection opens on the first call.
        /// </summary>
        public ContextdClient(string address, ContextdClientOptions? options = null)
        {
            if (string.IsNullOrWhiteSpace(address))
            {
                throw new ArgumentException("an address is required, for example 127.0.0.1:50151", nameof(address));
            }
            _options = options ?? new ContextdClientOptions();
            Address = _options.UseGrpcWeb && !string.IsNullOrWhiteSpace(_options.GrpcWebAddress)
                ? ParseAddress(_options.GrpcWebAddress!, "options.GrpcWebAddress")
                : ParseAddress(address, nameof(address));
            _channel = OpenChannel(Address, _options);
            _context = new ContextService.ContextServiceClient(_channel);
            _sessions = new SessionService.SessionServiceClient(_channel);
            _memory = new MemoryService.MemoryServiceClient(_channel);
            _prompts = new PromptService.PromptServiceClient(_channel);
            _chat = new ChatService.ChatServiceClient(_channel);
            _users = new UserService.UserServiceClient(_channel);
        }

        /// <summary>The address calls go to (the gRPC-Web one when that is in use).</summary>
        public string Target => _channel.Target;

        /// <summary>The address calls go to, as a URL.</summary>
        internal Uri Address { get; }

        // ContextService

        /// <summary>Joins the six system-prompt layers in their fixed order, with token counts.</summary>
        public Task<AssemblePromptResponse> AssemblePromptAsync(AssemblePromptRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.AssemblePromptAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Builds the message list under a token budget, inline or from a stored session.</summary>
        public Task<BuildMessagesResponse> BuildMessagesAsync(BuildMessagesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.BuildMessagesAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Marks a stored answer collected (or not), optionally remembering it.</summary>
        public Task<CollectResponse> CollectAsync(CollectRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.CollectAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Counts tokens of texts and messages.</summary>
        public Task<CountTokensResponse> CountTokensAsync(CountTokensRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.CountTokensAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>The server's tokenizers and its default.</summary>
        public Task<ListTokenizersResponse> ListTokenizersAsync(ListTokenizersRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_context.ListTokenizersAsync(request, Unary(cancellationToken)), cancellationToken);

        // SessionService

        /// <summary>Starts a new session (an empty window; the user's memories stay).</summary>
        public Task<CreateSessionResponse> CreateSessionAsync(CreateSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.CreateSessionAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>One session of the user.</summary>
        public Task<GetSessionResponse> GetSessionAsync(GetSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.GetSessionAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>The user's sessions, most recently active first, one page at a time.</summary>
        public Task<ListSessionsResponse> ListSessionsAsync(ListSessionsRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.ListSessionsAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Deletes a session with its messages and summaries.</summary>
        public Task<DeleteSessionResponse> DeleteSessionAsync(DeleteSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.DeleteSessionAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Stores messages at the end of a session, in one transaction.</summary>
        public Task<AppendMessagesResponse> AppendMessagesAsync(AppendMessagesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.AppendMessagesAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>A session's messages, oldest first, one page at a time.</summary>
        public Task<ListMessagesResponse> ListMessagesAsync(ListMessagesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.ListMessagesAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Stores a compression summary that replaces older messages of a session.</summary>
        public Task<AddCompressionSummaryResponse> AddCompressionSummaryAsync(AddCompressionSummaryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.AddCompressionSummaryAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Sets the short summary other sessions of the user see.</summary>
        public Task<SetSessionSummaryResponse> SetSessionSummaryAsync(SetSessionSummaryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.SetSessionSummaryAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>A session's event log (chat turns), oldest first, as it streams in.</summary>
        public IAsyncEnumerable<ExportEventsResponse> ExportEvents(ExportEventsRequest request, CancellationToken cancellationToken = default) =>
            ReadAllAsync(callOptions => _sessions.ExportEvents(request, callOptions), cancellationToken);

        /// <summary>
        /// A session's whole event log as a list, for callers that cannot consume
        /// <see cref="IAsyncEnumerable{T}"/> (Visual Basic has no <c>Await For Each</c>).
        /// </summary>
        public async Task<IReadOnlyList<ExportEventsResponse>> ExportEventsListAsync(ExportEventsRequest request, CancellationToken cancellationToken = default)
        {
            var events = new List<ExportEventsResponse>();
            await foreach (var item in ExportEvents(request, cancellationToken).ConfigureAwait(false))
            {
                events.Add(item);
            }
            return events;
        }

        /// <summary>
        /// Ends a session: its event log gets <c>session_end</c> with the request's mode, once
        /// (<c>Ended</c> is false when it was already ended). A later turn opens it again.
        /// </summary>
        public Task<EndSessionResponse> EndSessionAsync(EndSessionRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_sessions.EndSessionAsync(request, Unary(cancellationToken)), cancellationToken);

        // MemoryService

        /// <summary>Stores a memory of the user (the same text is stored once).</summary>
        public Task<AddMemoryResponse> AddMemoryAsync(AddMemoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.AddMemoryAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>The user's memories most relevant to a text, with scores.</summary>
        public Task<SearchMemoriesResponse> SearchMemoriesAsync(SearchMemoriesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.SearchMemoriesAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>The user's memories, newest first, one page at a time.</summary>
        public Task<ListMemoriesResponse> ListMemoriesAsync(ListMemoriesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.ListMemoriesAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Deletes one memory of the user, with the facts it superseded.</summary>
        public Task<DeleteMemoryResponse> DeleteMemoryAsync(DeleteMemoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.DeleteMemoryAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>
        /// Changes the fields of a memory its <c>UpdateMask</c> names (text, scope, metadata,
        /// validity, expiry); with <c>Supersede</c> a new text keeps the old one as a fact of the past.
        /// </summary>
        public Task<UpdateMemoryResponse> UpdateMemoryAsync(UpdateMemoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.UpdateMemoryAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>How the user's memories (or one of them) changed, newest first, one page at a time.</summary>
        public Task<ListMemoryHistoryResponse> ListMemoryHistoryAsync(ListMemoryHistoryRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_memory.ListMemoryHistoryAsync(request, Unary(cancellationToken)), cancellationToken);

        // PromptService

        /// <summary>Creates or replaces a scenario's prompt template.</summary>
        public Task<UpsertTemplateResponse> UpsertTemplateAsync(UpsertTemplateRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.UpsertTemplateAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Every scenario's prompt template.</summary>
        public Task<ListTemplatesResponse> ListTemplatesAsync(ListTemplatesRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.ListTemplatesAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Deletes a scenario's prompt template.</summary>
        public Task<DeleteTemplateResponse> DeleteTemplateAsync(DeleteTemplateRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.DeleteTemplateAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Creates or replaces a skill.</summary>
        public Task<UpsertSkillResponse> UpsertSkillAsync(UpsertSkillRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.UpsertSkillAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Skills, optionally only those for one host app.</summary>
        public Task<ListSkillsResponse> ListSkillsAsync(ListSkillsRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.ListSkillsAsync(request, Unary(cancellationToken)), cancellationToken);

        /// <summary>Deletes a skill.</summary>
        public Task<DeleteSkillResponse> DeleteSkillAsync(DeleteSkillRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_prompts.DeleteSkillAsync(request, Unary(cancellationToken)), cancellationToken);

        // UserService

        /// <summary>
        /// Erases everything stored for a user (sessions, messages, summaries, memories,
        /// event logs, API keys); <c>ConfirmUserId</c> must repeat the user's id.
        /// </summary>
        public Task<DeleteUserResponse> DeleteUserAsync(DeleteUserRequest request, CancellationToken cancellationToken = default) =>
            UnaryAsync(_users.DeleteUserAsync(request, Unary(cancellationToken)), cancellationToken);

        // ChatService

        /// <summary>
        /// One chat turn as its events arrive: TurnStarted, text deltas, tool calls, usage,
        /// then TurnCompleted. For C# (<c>await foreach</c>); Visual Basic code uses
        /// <see cref="StreamChatAsync"/>.
        /// </summary>
        public IAsyncEnumerable<StreamChatResponse> StreamChat(StreamChatRequest request, CancellationToken cancellationToken = default) =>
            ReadAllAsync(callOptions => _chat.StreamChat(request, callOptions), cancellationToken);

        /// <summary>
        /// One chat turn: calls <paramref name="onEvent"/> for every event as it arrives
        /// (on the caller's synchronization context, so a UI thread may update its controls)
        /// and returns the turn's final event. A turn that fails after it started is a
        /// TurnCompleted with status <c>TurnStatus.Error</c>, not an exception.
        /// </summary>
        /// <param name="request">The turn: session, user message, tools, model options.</param>
        /// <param name="onEvent">Called for each event, TurnCompleted included; may be <c>Nothing</c>.</param>
        /// <param name="cancellationToken">Cancels the turn; the server stores the partial answer.</param>
        public async Task<TurnCompleted> StreamChatAsync(
            StreamChatRequest request,
            Action<StreamChatResponse>? onEvent,
            CancellationToken cancellationToken = default)
        {
            TurnCompleted? completed = null;
            // No ConfigureAwait(false) here: onEvent runs where the caller awaited.
            await foreach (var item in StreamChat(request, cancellationToken))
            {
                onEvent?.Invoke(item);
                if (item.EventCase == StreamChatResponse.EventOneofCase.TurnCompleted)
                {
                    completed = item.TurnCompleted;
                }
            }
            return completed ?? throw ContextdException.Protocol("the chat stream ended without a TurnCompleted event");
        }

        /// <summary>Closes the connection; calls in flight are cancelled.</summary>
        public void Dispose() => _channel.Dispose();

        private static GrpcChannel OpenChannel(Uri address, ContextdClientOptions options)
        {
            var channelOptions = new GrpcChannelOptions
            {
                MaxReceiveMessageSize = options.MaxReceiveMessageSize,
                // A cancelled token surfaces as OperationCanceledException, as .NET callers expect.
                ThrowOperationCanceledOnCancellation = true,
            };
            if (options.UseGrpcWeb)
            {
                channelOptions.HttpHandler = new GrpcWebHandler(options.GrpcWebMode, options.HttpHandler ?? new HttpClientHandler());
                channelOptions.HttpVersion = HttpVersion.Version11;
#if NET5_0_OR_GREATER
                channelOptions.HttpVersionPolicy = HttpVersionPolicy.RequestVersionExact;
#endif
            }
            else if (options.HttpHandler != null)
            {
                channelOptions.HttpHandler = options.HttpHandler;
            }
            BearerCredentials.Apply(options, address, channelOptions);
            return GrpcChannel.ForAddress(address, channelOptions);
        }

        // contextd's own tools print host:port; the .NET channel needs a URL.
        private static Uri ParseAddress(string address, string parameter)
        {
            var url = address.Contains("://") ? address : "http://" + address;
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

        private static async Task<TResponse> UnaryAsync<TResponse>(AsyncUnaryCall<TResponse> call, CancellationToken cancellationToken)
        {
            using (call)
            {
                try
                {
                    return await call.ResponseAsync.ConfigureAwait(false);
                }
                catch (RpcException error)
                {
                    throw ContextdException.FromRpcException(error);
                }
                catch (OperationCanceledException cancelled) when (!cancellationToken.IsCancellationRequested)
                {
                    throw Uncancelled(cancelled, call.GetStatus);
                }
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
                while (true)
                {
                    bool more;
                    // C# allows no yield inside a try with a catch, so only the read is guarded.
                    try
                    {
                        more = await call.ResponseStream.MoveNext(cancellationToken).ConfigureAwait(false);
                    }
                    catch (RpcException error)
                    {
                        throw ContextdException.FromRpcException(error);
                    }
                    catch (OperationCanceledException cancelled) when (!cancellationToken.IsCancellationRequested)
                    {
                        throw Uncancelled(cancelled, call.GetStatus);
                    }
                    if (!more)
                    {
                        yield break;
                    }
                    yield return call.ResponseStream.Current;
                }
            }
        }

        // With ThrowOperationCanceledOnCancellation, grpc-dotnet reports a call that failed while
        // its credentials were read (a TokenProvider that threw, a deadline that passed meanwhile)
        // as a cancellation the caller never asked for. The call's status says what happened.
        private static Exception Uncancelled(OperationCanceledException cancelled, Func<Status> status)
        {
            Status final;
            try
            {
                final = status();
            }
            catch (InvalidOperationException)
            {
                return cancelled;
            }
            return final.StatusCode == StatusCode.OK || final.StatusCode == StatusCode.Cancelled
                ? cancelled
                : ContextdException.FromRpcException(new RpcException(final));
        }
    }
}
