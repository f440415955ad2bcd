using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Text.Json;
using Contextd.V1;
using Google.Protobuf;
using Microsoft.Extensions.AI;

namespace Contextd.Client
{
    /// <summary>
    /// The names under which <see cref="ContextdChatClient"/> puts contextd's own figures into
    /// <see cref="UsageDetails.AdditionalCounts"/> and <c>AdditionalProperties</c>.
    /// </summary>
    public static class ContextdProperties
    {
        /// <summary>contextd's own count of the prompt before each model call, summed over the turn.</summary>
        public const string PromptTokensEstimate = "contextd.prompt_tokens_estimate";

        /// <summary>Of the input tokens, those written to the provider's prompt cache.</summary>
        public const string CacheWriteTokens = "contextd.cache_write_tokens";

        /// <summary>1 when a figure was counted by contextd because the provider reported none, else 0.</summary>
        public const string Estimated = "contextd.estimated";

        /// <summary>The turn's index within the session (from 1), in a response's <c>AdditionalProperties</c>.</summary>
        public const string TurnIndex = "contextd.turn_index";

        /// <summary>contextd's <see cref="TurnStatus"/> of the turn, in a response's <c>AdditionalProperties</c>.</summary>
        public const string TurnStatus = "contextd.turn_status";

        /// <summary>The model provider that answered (echo, openai, anthropic), in a response's <c>AdditionalProperties</c>.</summary>
        public const string Provider = "contextd.provider";

        /// <summary>True when the prompt estimate was over the server's warning level, in a response's <c>AdditionalProperties</c>.</summary>
        public const string PromptTokensWarning = "contextd.prompt_tokens_warning";

        /// <summary>The context report of the turn (a <see cref="BuildReport"/>), in a response's <c>AdditionalProperties</c>.</summary>
        public const string Context = "contextd.context";
    }
}
