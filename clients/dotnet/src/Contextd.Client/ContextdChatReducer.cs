using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;
using Microsoft.Extensions.AI;

namespace Contextd.Client
{
    /// <summary>
    /// An <see cref="IChatReducer"/> that fits a conversation to a token budget with contextd's
    /// <c>BuildMessages</c> (inline mode), for hosts that call their own model: the system
    /// messages and the user's last message are kept, the history is trimmed oldest first, tool
    /// calls stay with their results, and contextd reports what it did.
    /// </summary>
    /// <remarks>
    /// The leading system messages become contextd's system prompts (joined into one system
    /// message when there are several). The last message is the user's message; a list that ends
    /// with tool results is reduced with no user message, keeping the last call with its results.
    /// Kept messages are the caller's own <see cref="ChatMessage"/> objects where contextd kept
    /// them whole, and new ones where it changed them (a tool call without a result removed, a
    /// tool result capped or cleared by <see cref="ContextdChatReducerOptions.Editing"/>).
    /// </remarks>
    public sealed class ContextdChatReducer : IChatReducer
    {
        private readonly IContextdClient _client;
        private readonly ContextdChatReducerOptions _options;

        /// <summary>Reductions through <paramref name="client"/>.</summary>
        public ContextdChatReducer(IContextdClient client, ContextdChatReducerOptions options)
        {
            _client = client ?? throw new ArgumentNullException(nameof(client));
            _options = options ?? throw new ArgumentNullException(nameof(options));
            if (options.TokenBudget <= 0)
            {
                throw new ArgumentException("TokenBudget must be a positive number of tokens", nameof(options));
            }
        }

        /// <inheritdoc />
        public async Task<IEnumerable<ChatMessage>> ReduceAsync(IEnumerable<ChatMessage> messages, CancellationToken cancellationToken)
        {
            var reduction = await ReduceWithReportAsync(messages, cancellationToken).ConfigureAwait(false);
            return reduction.Messages;
        }

        /// <summary>The reduced messages with contextd's report.</summary>
        public async Task<ContextdReduction> ReduceWithReportAsync(IEnumerable<ChatMessage> messages, CancellationToken cancellationToken = default)
        {
            if (messages is null)
            {
                throw new ArgumentNullException(nameof(messages));
            }
            var list = messages.ToList();
            if (list.Count == 0)
            {
                throw new ArgumentException("no messages to reduce", nameof(messages));
            }
            var request = new BuildMessagesRequest
            {
                TokenBudget = _options.TokenBudget,
                Tokenizer = _options.Tokenizer,
                OverflowPolicy = _options.OverflowPolicy,
                Editing = _options.Editing,
            };
            var systems = 0;
            while (systems < list.Count && list[systems].Role == ChatRole.System)
            {
                request.SystemPrompts.Add(list[systems].Text);
                systems++;
            }
            var end = list.Count;
            if (end > systems && list[end - 1].Role == ChatRole.User)
            {
                end--;
                var parts = ChatMessageMapping.UserParts(list[end], "messages[" + end + "]");
                if (parts.All(p => p.PartCase == ContentPart.PartOneofCase.Text))
                {
                    request.UserMessage = string.Concat(parts.Select(p => p.Text));
                }
                else
                {
                    request.UserMessageParts.AddRange(parts);
                }
            }
            // Each history message is named by its place in the caller's list, so that what
            // contextd keeps whole can be given back as the caller's own message.
            var sent = new Dictionary<string, (int Index, int ToolCalls)>();
            for (var i = systems; i < end; i++)
            {
                var converted = ChatMessageMapping.ToHistory(list[i], "messages[" + i + "]").ToList();
                for (var k = 0; k < converted.Count; k++)
                {
                    converted[k].Id = i + "." + k;
                    request.History.Add(converted[k]);
                }
                // A tool message split into several results maps back whole only as new messages.
                sent[i + ".0"] = (converted.Count == 1 ? i : -1, converted[0].ToolCalls.Count);
            }

            var built = await _client.BuildMessagesAsync(request, cancellationToken).ConfigureAwait(false);
            // A capped or cleared message keeps its id and tool calls but not its content.
            foreach (var edit in built.Report.Edits)
            {
                if (edit.Index >= 0 && edit.Index < request.History.Count)
                {
                    sent.Remove(request.History[edit.Index].Id);
                }
            }
            var reduced = new List<ChatMessage>(built.Messages.Count);
            foreach (var message in built.Messages)
            {
                reduced.Add(Original(message, list, systems, end, request, sent) ?? ChatMessageMapping.FromContextd(message));
            }
            _options.ReportCallback?.Invoke(built.Report);
            return new ContextdReduction(reduced, built.Report);
        }

        /// <summary>The caller's message that <paramref name="message"/> is unchanged, if there is one.</summary>
        private static ChatMessage? Original(
            Message message,
            List<ChatMessage> list,
            int systems,
            int end,
            BuildMessagesRequest request,
            Dictionary<string, (int Index, int ToolCalls)> sent)
        {
            switch (message.Role)
            {
                case Role.System:
                    return systems == 1 && message.Content == request.SystemPrompts[0] ? list[0] : null;
                case Role.User when message.Id.Length == 0:
                    return end < list.Count ? list[end] : null;
                default:
                    return sent.TryGetValue(message.Id, out var origin) && origin.Index >= 0
                        && origin.ToolCalls == message.ToolCalls.Count
                        ? list[origin.Index]
                        : null;
            }
        }
    }
}
