using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;
using Microsoft.Extensions.AI;

namespace Contextd.Client
{
    /// <summary>
    /// contextd's chat turns (<c>StreamChat</c>) as a Microsoft.Extensions.AI
    /// <see cref="IChatClient"/>, for hosts that compose their AI through it (Semantic Kernel,
    /// <c>ChatClientBuilder</c> pipelines with function invocation, logging, telemetry).
    /// </summary>
    /// <remarks>
    /// <para>
    /// A contextd session is the conversation: every response carries its id as
    /// <see cref="ChatResponse.ConversationId"/>, and a request whose
    /// <see cref="ChatOptions.ConversationId"/> names it continues it. Then the session holds the
    /// history and the messages must be only what is new: the user's message, or the results of
    /// the function calls the previous response asked for (<c>FunctionInvokingChatClient</c>
    /// sends exactly that). Without a <c>ConversationId</c> a new session is started: a lone user
    /// message is answered in session mode (contextd builds the context from its layers: scenario
    /// template, memories, recent sessions); a list with history or instructions is sent as the
    /// host's own message list (prebuilt mode), fitted to the budget.
    /// </para>
    /// <para>
    /// Functions of <see cref="ChatOptions.Tools"/> are offered to the model; a call to one ends the
    /// turn with <see cref="ChatFinishReason.ToolCalls"/> and a <see cref="FunctionCallContent"/>.
    /// Calls of contextd's own server-side tools (memory_search) come as
    /// <see cref="FunctionCallContent"/> with <see cref="FunctionCallContent.InformationalOnly"/> set:
    /// they have run already. Usage is the turn's, with contextd's own figures in
    /// <see cref="UsageDetails.AdditionalCounts"/> under the <see cref="ContextdProperties"/> names.
    /// A turn that fails after it started (the model provider failed) throws
    /// <see cref="ContextdTurnException"/>; a refused request throws <see cref="ContextdException"/>;
    /// a cancelled token stops the turn (contextd stores the partial answer) and throws
    /// <see cref="OperationCanceledException"/>.
    /// </para>
    /// <para>
    /// Thread-safe. It does not own the <see cref="ContextdClient"/>: disposing it leaves the client open.
    /// </para>
    /// </remarks>
    public sealed class ContextdChatClient : IChatClient
    {
        private readonly IContextdClient _client;
        private readonly ContextdChatClientOptions _options;
        private readonly ChatClientMetadata _metadata;

        /// <summary>Chat turns through <paramref name="client"/>.</summary>
        public ContextdChatClient(IContextdClient client, ContextdChatClientOptions? options = null)
        {
            _client = client ?? throw new ArgumentNullException(nameof(client));
            _options = options ?? new ContextdChatClientOptions();
            _metadata = new ChatClientMetadata("contextd", (client as ContextdClient)?.Address);
        }

        /// <inheritdoc />
        public async Task<ChatResponse> GetResponseAsync(
            IEnumerable<ChatMessage> messages,
            ChatOptions? options = null,
            CancellationToken cancellationToken = default)
        {
            var request = BuildRequest(messages, options);
            var turn = new TurnReader(request);
            await foreach (var item in _client.StreamChatAsync(request, cancellationToken).ConfigureAwait(false))
            {
                turn.Read(item);
            }
            return turn.ToResponse();
        }

        /// <inheritdoc />
        public async IAsyncEnumerable<ChatResponseUpdate> GetStreamingResponseAsync(
            IEnumerable<ChatMessage> messages,
            ChatOptions? options = null,
            [EnumeratorCancellation] CancellationToken cancellationToken = default)
        {
            var request = BuildRequest(messages, options);
            var turn = new TurnReader(request);
            await foreach (var item in _client.StreamChatAsync(request, cancellationToken).ConfigureAwait(false))
            {
                var update = turn.Read(item);
                if (update != null)
                {
                    yield return update;
                }
            }
            turn.EnsureCompleted();
        }

        /// <summary>
        /// <see cref="ChatClientMetadata"/> (provider <c>contextd</c> and the server's address),
        /// the <see cref="IContextdClient"/> (or its own class), or this client; <c>null</c> for anything else.
        /// </summary>
        public object? GetService(Type serviceType, object? serviceKey = null)
        {
            if (serviceType is null)
            {
                throw new ArgumentNullException(nameof(serviceType));
            }
            if (serviceKey != null)
            {
                return null;
            }
            if (serviceType == typeof(ChatClientMetadata))
            {
                return _metadata;
            }
            if (serviceType.IsInstanceOfType(_client) && (serviceType == typeof(IContextdClient) || serviceType == _client.GetType()))
            {
                return _client;
            }
            return serviceType.IsInstanceOfType(this) ? this : null;
        }

        /// <summary>Does nothing: the <see cref="ContextdClient"/> belongs to the caller.</summary>
        public void Dispose()
        {
        }

        private StreamChatRequest BuildRequest(IEnumerable<ChatMessage> messages, ChatOptions? options)
        {
            if (messages is null)
            {
                throw new ArgumentNullException(nameof(messages));
            }
            var list = messages.ToList();
            if (list.Count == 0)
            {
                throw new ArgumentException("no messages: give at least the user's message", nameof(messages));
            }
            // A host may start from its own request (ChatOptions.RawRepresentationFactory) to set
            // what ChatOptions has no word for: cache layout, memory mode, prompt limit policy.
            var request = options?.RawRepresentationFactory?.Invoke(this) as StreamChatRequest ?? new StreamChatRequest();
            ApplySession(request, options);
            ApplyModel(request, options);
            ApplyTools(request, options);

            var earlier = ApplyInput(request, list);
            var inSession = request.Session.SessionId.Length > 0;
            var instructions = options?.Instructions;
            if (inSession)
            {
                if (earlier > 0)
                {
                    throw new ArgumentException(
                        "ChatOptions.ConversationId names a contextd session, which holds the conversation so far: " +
                        "send only the new user message or the tool results, not " + earlier + " earlier message(s)",
                        nameof(messages));
                }
                if (!string.IsNullOrEmpty(instructions))
                {
                    throw new ArgumentException(
                        "ChatOptions.Instructions cannot go into a stored session: its system prompt comes from " +
                        "the server's layers and the session's scenario",
                        nameof(options));
                }
            }
            else if (earlier > 0 || !string.IsNullOrEmpty(instructions))
            {
                // Prebuilt mode: the host's own list, leading system messages first.
                if (!string.IsNullOrEmpty(instructions))
                {
                    request.Messages.Add(new Message { Role = Role.System, Content = instructions });
                }
                for (var i = 0; i < earlier; i++)
                {
                    request.Messages.AddRange(ChatMessageMapping.ToHistory(list[i], "messages[" + i + "]"));
                }
            }
            return request;
        }

        private void ApplySession(StreamChatRequest request, ChatOptions? options)
        {
            var session = request.Session ?? new SessionContext();
            request.Session = session;
            if (session.UserId.Length == 0)
            {
                session.UserId = _options.UserId;
            }
            if (session.Scenario.Length == 0)
            {
                session.Scenario = _options.Scenario;
            }
            if (session.Host.Length == 0)
            {
                session.Host = _options.Host;
            }
            foreach (var pair in _options.Variables)
            {
                if (!session.Variables.ContainsKey(pair.Key))
                {
                    session.Variables.Add(pair.Key, pair.Value);
                }
            }
            if (!string.IsNullOrEmpty(options?.ConversationId))
            {
                session.SessionId = options!.ConversationId;
            }
            if (request.Title.Length == 0)
            {
                request.Title = _options.Title;
            }
            if (request.Mode.Length == 0)
            {
                request.Mode = _options.Mode;
            }
            if (request.TokenBudget == 0)
            {
                request.TokenBudget = _options.TokenBudget;
            }
            if (request.Tokenizer.Length == 0)
            {
                request.Tokenizer = _options.Tokenizer;
            }
            if (request.ToolProtocol == ToolProtocol.Unspecified)
            {
                request.ToolProtocol = _options.ToolProtocol;
            }
        }

        // contextd's ModelOptions has the model, temperature, output tokens and stop sequences;
        // ChatOptions' other sampling settings have no counterpart and are not sent.
        private static void ApplyModel(StreamChatRequest request, ChatOptions? options)
        {
            if (options == null)
            {
                return;
            }
            var model = request.Model ?? new ModelOptions();
            if (!string.IsNullOrEmpty(options.ModelId))
            {
                model.Model = options.ModelId;
            }
            if (options.Temperature is float temperature)
            {
                model.Temperature = temperature;
            }
            if (options.MaxOutputTokens is int maxOutputTokens)
            {
                if (maxOutputTokens <= 0)
                {
                    throw new ArgumentException("ChatOptions.MaxOutputTokens must be positive", nameof(options));
                }
                model.MaxOutputTokens = maxOutputTokens;
            }
            if (options.StopSequences != null)
            {
                model.Stop.AddRange(options.StopSequences);
            }
            request.Model = model;
        }

        private static void ApplyTools(StreamChatRequest request, ChatOptions? options)
        {
            if (options?.Tools is not { Count: > 0 } tools || options.ToolMode is NoneChatToolMode)
            {
                return;
            }
            if (options.ToolMode is RequiredChatToolMode)
            {
                throw new NotSupportedException(
                    "contextd lets the model choose whether to call a function: use ChatToolMode.Auto or ChatToolMode.None");
            }
            foreach (var tool in tools)
            {
                if (tool is not AIFunctionDeclaration function)
                {
                    throw new NotSupportedException(
                        "contextd offers the model functions only; the tool '" + tool.Name + "' is a " + tool.GetType().Name);
                }
                request.Tools.Add(new ToolDefinition
                {
                    Name = function.Name,
                    Description = function.Description ?? "",
                    ParametersJson = function.JsonSchema.ValueKind == System.Text.Json.JsonValueKind.Undefined
                        ? ""
                        : function.JsonSchema.GetRawText(),
                });
            }
        }

        /// <summary>
        /// Puts the new input into the request: the trailing tool results, else the last message,
        /// which must be the user's. Returns how many messages came before it.
        /// </summary>
        private static int ApplyInput(StreamChatRequest request, List<ChatMessage> list)
        {
            var firstTool = list.Count;
            while (firstTool > 0 && list[firstTool - 1].Role == ChatRole.Tool)
            {
                firstTool--;
            }
            if (firstTool < list.Count)
            {
                if (request.Session.SessionId.Length == 0)
                {
                    throw new ArgumentException(
                        "tool results continue a turn of a contextd session: set ChatOptions.ConversationId to the " +
                        "ConversationId of the response that asked for the function calls",
                        "messages");
                }
                for (var i = firstTool; i < list.Count; i++)
                {
                    foreach (var message in ChatMessageMapping.ToHistory(list[i], "messages[" + i + "]"))
                    {
                        request.ToolResults.Add(new ToolResult { ToolCallId = message.ToolCallId, Content = message.Content });
                    }
                }
                return firstTool;
            }
            var last = list.Count - 1;
            if (list[last].Role != ChatRole.User)
            {
                throw new ArgumentException(
                    "the last message must be the user's, or the results of function calls (role tool); it is the " +
                    list[last].Role.Value + "'s",
                    "messages");
            }
            var parts = ChatMessageMapping.UserParts(list[last], "messages[" + last + "]");
            if (parts.All(p => p.PartCase == ContentPart.PartOneofCase.Text))
            {
                request.UserMessage = string.Concat(parts.Select(p => p.Text));
            }
            else
            {
                request.UserMessageParts.AddRange(parts);
            }
            return last;
        }

        /// <summary>One turn's events, as updates while they stream and as a response at the end.</summary>
        private sealed class TurnReader
        {
            private readonly HashSet<string> _hostTools;
            private readonly List<FunctionCallContent> _calls = new List<FunctionCallContent>();
            private readonly HashSet<string> _announced = new HashSet<string>();
            private TurnStarted? _started;
            private DateTimeOffset _createdAt;
            private TurnCompleted? _completed;

            internal TurnReader(StreamChatRequest request)
            {
                _hostTools = new HashSet<string>(request.Tools.Select(t => t.Name));
            }

            private string SessionId => _started?.SessionId ?? "";

            /// <summary>The update for one event; <c>null</c> for an event that adds nothing to the answer.</summary>
            internal ChatResponseUpdate? Read(StreamChatResponse item)
            {
                switch (item.EventCase)
                {
                    case StreamChatResponse.EventOneofCase.TurnStarted:
                        _started = item.TurnStarted;
                        _createdAt = DateTimeOffset.UtcNow;
                        var started = Update(item, new List<AIContent>());
                        started.AdditionalProperties = StartedProperties();
                        return started;
                    case StreamChatResponse.EventOneofCase.TextDelta:
                        return Update(item, new List<AIContent> { new TextContent(item.TextDelta.Text) });
                    case StreamChatResponse.EventOneofCase.ToolCall:
                        var call = ChatMessageMapping.ToFunctionCall(item.ToolCall.Call);
                        // Only the host's own functions are for the caller to run.
                        call.InformationalOnly = !_hostTools.Contains(call.Name);
                        _calls.Add(call);
                        _announced.Add(call.CallId);
                        return Update(item, new List<AIContent> { call });
                    case StreamChatResponse.EventOneofCase.TurnCompleted:
                        _completed = item.TurnCompleted;
                        EnsureCompleted();
                        var contents = new List<AIContent>(PendingCalls());
                        contents.Add(new UsageContent(ChatMessageMapping.ToUsage(_completed.TurnUsage)));
                        var completed = Update(item, contents);
                        completed.FinishReason = FinishReason(_completed.Status);
                        completed.MessageId = completed.ResponseId = AssistantMessageId();
                        completed.AdditionalProperties = new AdditionalPropertiesDictionary
                        {
                            [ContextdProperties.TurnStatus] = _completed.Status,
                        };
                        return completed;
                    default:
                        // Usage of one step: the turn's total comes with TurnCompleted. An event
                        // kind of a newer server is skipped.
                        return null;
                }
            }

            /// <summary>Throws unless the turn ended with an answer or with calls for the host.</summary>
            internal void EnsureCompleted()
            {
                if (_completed == null)
                {
                    throw ContextdException.Protocol("the chat stream ended without a TurnCompleted event");
                }
                if (_completed.Status == TurnStatus.Error || _completed.Status == TurnStatus.Cancelled)
                {
                    throw new ContextdTurnException(SessionId, _completed);
                }
            }

            internal ChatResponse ToResponse()
            {
                EnsureCompleted();
                var completed = _completed!;
                var contents = new List<AIContent>();
                // final_text: with the ReAct protocol the deltas carry the tags, this only the answer.
                if (completed.FinalText.Length > 0)
                {
                    contents.Add(new TextContent(completed.FinalText));
                }
                contents.AddRange(_calls);
                contents.AddRange(PendingCalls());
                var message = new ChatMessage(ChatRole.Assistant, contents)
                {
                    MessageId = AssistantMessageId(),
                    CreatedAt = _createdAt,
                    RawRepresentation = completed,
                };
                var properties = StartedProperties();
                properties[ContextdProperties.TurnStatus] = completed.Status;
                return new ChatResponse(message)
                {
                    ResponseId = AssistantMessageId(),
                    ConversationId = SessionId,
                    ModelId = _started?.Model,
                    CreatedAt = _createdAt,
                    FinishReason = FinishReason(completed.Status),
                    Usage = ChatMessageMapping.ToUsage(completed.TurnUsage),
                    RawRepresentation = completed,
                    AdditionalProperties = properties,
                };
            }

            // Calls for the host that no ToolCall event announced (the ReAct protocol's, say).
            private IEnumerable<FunctionCallContent> PendingCalls()
            {
                foreach (var pending in _completed!.PendingToolCalls)
                {
                    if (_announced.Add(pending.Id))
                    {
                        var call = ChatMessageMapping.ToFunctionCall(pending);
                        _calls.Add(call);
                        yield return call;
                    }
                }
            }

            private string? AssistantMessageId() =>
                string.IsNullOrEmpty(_completed?.AssistantMessageId) ? null : _completed!.AssistantMessageId;

            private AdditionalPropertiesDictionary StartedProperties()
            {
                var properties = new AdditionalPropertiesDictionary();
                if (_started != null)
                {
                    properties[ContextdProperties.TurnIndex] = _started.TurnIndex;
                    properties[ContextdProperties.Provider] = _started.Provider;
                    properties[ContextdProperties.PromptTokensWarning] = _started.PromptTokensWarning;
                    properties[ContextdProperties.Context] = _started.Context;
                }
                return properties;
            }

            private ChatResponseUpdate Update(StreamChatResponse item, IList<AIContent> contents) =>
                new ChatResponseUpdate(ChatRole.Assistant, contents)
                {
                    ConversationId = SessionId,
                    ModelId = _started?.Model,
                    CreatedAt = _createdAt,
                    RawRepresentation = item,
                };

            private static ChatFinishReason FinishReason(TurnStatus status) => status switch
            {
                TurnStatus.Ok => ChatFinishReason.Stop,
                TurnStatus.RequiresAction => ChatFinishReason.ToolCalls,
                // The server's --max-steps model calls were made without an answer.
                TurnStatus.MaxSteps => new ChatFinishReason("max_steps"),
                _ => new ChatFinishReason(status.ToString()),
            };
        }
    }
}
