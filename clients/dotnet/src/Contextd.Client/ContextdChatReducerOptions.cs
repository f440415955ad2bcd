using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;
using Microsoft.Extensions.AI;

namespace Contextd.Client
{
    /// <summary>What <see cref="ContextdChatReducer"/> fits a conversation to.</summary>
    public sealed class ContextdChatReducerOptions
    {
        /// <summary>Most tokens of the whole reduced list. Required, positive.</summary>
        public int TokenBudget { get; set; }

        /// <summary>The tokenizer that counts, as the host's model does; empty for the server's default.</summary>
        public string Tokenizer { get; set; } = "";

        /// <summary>What to do when the system prompt and the user's message alone exceed the budget.</summary>
        public OverflowPolicy OverflowPolicy { get; set; } = OverflowPolicy.Unspecified;

        /// <summary>
        /// How tool results are edited before the budget (capped, old ones cleared); null for the
        /// server's defaults. Edited messages come back as new messages, never the caller's own.
        /// </summary>
        public ContextEditing? Editing { get; set; }

        /// <summary>Called with contextd's report of every reduction: what was kept, dropped and why.</summary>
        public Action<BuildReport>? ReportCallback { get; set; }
    }
}
