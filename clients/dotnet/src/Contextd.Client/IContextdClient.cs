using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;

namespace Contextd.Client
{
    /// <summary>
    /// The calls of a <see cref="ContextdClient"/>, as an interface to mock in a host's tests
    /// and to take from dependency injection (<c>AddContextdClient</c>).
    /// Every failed call throws <see cref="ContextdException"/>; a cancelled token throws
    /// <see cref="OperationCanceledException"/>; a null request throws
    /// <see cref="ArgumentNullException"/>. No method needs the caller's synchronization
    /// context, so blocking on one (<c>.Result</c> on a UI thread) does not deadlock.
    /// </summary>
    public interface IContextdClient
    {
        // ContextService

        /// <summary>Joins the six system-prompt layers in their fixed order, with token counts.</summary>
        Task<AssemblePromptResponse> AssemblePromptAsync(AssemblePromptRequest request, CancellationToken cancellationToken = default);

        /// <summary>Builds the message list under a token budget, inline or from a stored session.</summary>
        Task<BuildMessagesResponse> BuildMessagesAsync(BuildMessagesRequest request, CancellationToken cancellationToken = default);

        /// <summary>Marks a stored answer collected (or not), optionally remembering it.</summary>
        Task<CollectResponse> CollectAsync(CollectRequest request, CancellationToken cancellationToken = default);

        /// <summary>Counts tokens of texts and messages.</summary>
        Task<CountTokensResponse> CountTokensAsync(CountTokensRequest request, CancellationToken cancellationToken = default);

        /// <summary>The server's tokenizers and its default.</summary>
        Task<ListTokenizersResponse> ListTokenizersAsync(ListTokenizersRequest request, CancellationToken cancellationToken = default);

        // SessionService

        /// <summary>Starts a new session (an empty window; the user's memories stay).</summary>
        Task<CreateSessionResponse> CreateSessionAsync(CreateSessionRequest request, CancellationToken cancellationToken = default);

        /// <summary>One session of the user.</summary>
        Task<GetSessionResponse> GetSessionAsync(GetSessionRequest request, CancellationToken cancellationToken = default);

        /// <summary>One page of the user's sessions, most recently active first (<see cref="GetSessionsAsync"/> reads every page).</summary>
        Task<ListSessionsResponse> ListSessionsAsync(ListSessionsRequest request, CancellationToken cancellationToken = default);

        /// <summary>Deletes a session with its messages and summaries.</summary>
        Task<DeleteSessionResponse> DeleteSessionAsync(DeleteSessionRequest request, CancellationToken cancellationToken = default);

        /// <summary>Stores messages at the end of a session, in one transaction.</summary>
        Task<AppendMessagesResponse> AppendMessagesAsync(AppendMessagesRequest request, CancellationToken cancellationToken = default);

        /// <summary>One page of a session's messages, oldest first (<see cref="GetMessagesAsync"/> reads every page).</summary>
        Task<ListMessagesResponse> ListMessagesAsync(ListMessagesRequest request, CancellationToken cancellationToken = default);

        /// <summary>Stores a compression summary that replaces older messages of a session.</summary>
        Task<AddCompressionSummaryResponse> AddCompressionSummaryAsync(AddCompressionSummaryRequest request, CancellationToken cancellationToken = default);

        /// <summary>Sets the short summary other sessions of the user see.</summary>
        Task<SetSessionSummaryResponse> SetSessionSummaryAsync(SetSessionSummaryRequest request, CancellationToken cancellationToken = default);

        /// <summary>Ends a session: its event log gets <c>session_end</c> with the request's mode, once (<c>Ended</c> is false when it was already ended). A later turn opens it again.</summary>
        Task<EndSessionResponse> EndSessionAsync(EndSessionRequest request, CancellationToken cancellationToken = default);

        // MemoryService

        /// <summary>Stores a memory of the user (the same text is stored once).</summary>
        Task<AddMemoryResponse> AddMemoryAsync(AddMemoryRequest request, CancellationToken cancellationToken = default);

        /// <summary>The user's memories most relevant to a text, with scores.</summary>
        Task<SearchMemoriesResponse> SearchMemoriesAsync(SearchMemoriesRequest request, CancellationToken cancellationToken = default);

        /// <summary>One page of the user's memories, newest first (<see cref="GetMemoriesAsync"/> reads every page).</summary>
        Task<ListMemoriesResponse> ListMemoriesAsync(ListMemoriesRequest request, CancellationToken cancellationToken = default);

        /// <summary>Deletes one memory of the user, with the facts it superseded.</summary>
        Task<DeleteMemoryResponse> DeleteMemoryAsync(DeleteMemoryRequest request, CancellationToken cancellationToken = default);

        /// <summary>Changes the fields of a memory its <c>UpdateMask</c> names (text, scope, metadata, validity, expiry); with <c>Supersede</c> a new text keeps the old one as a fact of the past.</summary>
        Task<UpdateMemoryResponse> UpdateMemoryAsync(UpdateMemoryRequest request, CancellationToken cancellationToken = default);

        /// <summary>One page of how the user's memories (or one of them) changed, newest first (<see cref="GetMemoryHistoryAsync"/> reads every page).</summary>
        Task<ListMemoryHistoryResponse> ListMemoryHistoryAsync(ListMemoryHistoryRequest request, CancellationToken cancellationToken = default);

        // PromptService

        /// <summary>Creates or replaces a scenario's prompt template.</summary>
        Task<UpsertTemplateResponse> UpsertTemplateAsync(UpsertTemplateRequest request, CancellationToken cancellationToken = default);

        /// <summary>Every scenario's prompt template.</summary>
        Task<ListTemplatesResponse> ListTemplatesAsync(ListTemplatesRequest request, CancellationToken cancellationToken = default);

        /// <summary>Deletes a scenario's prompt template.</summary>
        Task<DeleteTemplateResponse> DeleteTemplateAsync(DeleteTemplateRequest request, CancellationToken cancellationToken = default);

        /// <summary>Creates or replaces a skill.</summary>
        Task<UpsertSkillResponse> UpsertSkillAsync(UpsertSkillRequest request, CancellationToken cancellationToken = default);

        /// <summary>Skills, optionally only those for one host app.</summary>
        Task<ListSkillsResponse> ListSkillsAsync(ListSkillsRequest request, CancellationToken cancellationToken = default);

        /// <summary>Deletes a skill.</summary>
        Task<DeleteSkillResponse> DeleteSkillAsync(DeleteSkillRequest request, CancellationToken cancellationToken = default);

        // UserService

        /// <summary>Erases everything stored for a user (sessions, messages, summaries, memories, event logs, API keys); <c>ConfirmUserId</c> must repeat the user's id.</summary>
        Task<DeleteUserResponse> DeleteUserAsync(DeleteUserRequest request, CancellationToken cancellationToken = default);

        // Streams

        /// <summary>A session's event log (chat turns), oldest first, as it streams in.</summary>
        IAsyncEnumerable<ExportEventsResponse> ExportEventsAsync(ExportEventsRequest request, CancellationToken cancellationToken = default);

        /// <summary>
        /// A session's whole event log as a list, for callers that cannot consume
        /// <see cref="IAsyncEnumerable{T}"/> (Visual Basic has no <c>Await For Each</c>).
        /// </summary>
        Task<IReadOnlyList<ExportEventsResponse>> ExportEventsListAsync(ExportEventsRequest request, CancellationToken cancellationToken = default);

        /// <summary>
        /// One chat turn as its events arrive: TurnStarted, text deltas, tool calls, usage,
        /// then TurnCompleted. A turn that fails after it started ends with a TurnCompleted
        /// whose status is <c>TurnStatus.Error</c>, not an exception.
        /// </summary>
        IAsyncEnumerable<StreamChatResponse> StreamChatAsync(StreamChatRequest request, CancellationToken cancellationToken = default);

        /// <summary>
        /// One chat turn, for code without <c>await foreach</c> (Visual Basic): calls
        /// <paramref name="onEvent"/> for every event as it arrives, on the thread that read it
        /// (not the caller's UI thread: use the <see cref="IProgress{T}"/> form to update
        /// controls), and returns the turn's final event.
        /// </summary>
        Task<TurnCompleted> RunChatTurnAsync(StreamChatRequest request, Action<StreamChatResponse>? onEvent, CancellationToken cancellationToken = default);

        /// <summary>
        /// One chat turn, reporting every event to <paramref name="progress"/> as it arrives
        /// (a <see cref="Progress{T}"/> made on a UI thread runs its handler there, in order),
        /// and returning the turn's final event.
        /// </summary>
        Task<TurnCompleted> RunChatTurnAsync(StreamChatRequest request, IProgress<StreamChatResponse>? progress, CancellationToken cancellationToken = default);

        // Every page of a list

        /// <summary>The user's sessions, most recently active first, read page by page as enumerated.</summary>
        ContextdPageable<Session> GetSessionsAsync(ListSessionsRequest request, CancellationToken cancellationToken = default);

        /// <summary>A session's messages, oldest first, read page by page as enumerated.</summary>
        ContextdPageable<SessionMessage> GetMessagesAsync(ListMessagesRequest request, CancellationToken cancellationToken = default);

        /// <summary>The user's memories, newest first, read page by page as enumerated.</summary>
        ContextdPageable<Memory> GetMemoriesAsync(ListMemoriesRequest request, CancellationToken cancellationToken = default);

        /// <summary>How the user's memories (or one of them) changed, newest first, read page by page as enumerated.</summary>
        ContextdPageable<MemoryChange> GetMemoryHistoryAsync(ListMemoryHistoryRequest request, CancellationToken cancellationToken = default);
    }
}
