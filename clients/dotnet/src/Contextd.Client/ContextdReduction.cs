using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Contextd.V1;
using Microsoft.Extensions.AI;

namespace Contextd.Client
{
    /// <summary>A reduced conversation and contextd's report of it.</summary>
    public sealed class ContextdReduction
    {
        internal ContextdReduction(IReadOnlyList<ChatMessage> messages, BuildReport report)
        {
            Messages = messages;
            Report = report;
        }

        /// <summary>The messages to send to the model, in order.</summary>
        public IReadOnlyList<ChatMessage> Messages { get; }

        /// <summary>
        /// Token counts, the history kept, the ranges dropped with their reasons, the tool calls
        /// removed and the tool results moved.
        /// </summary>
        public BuildReport Report { get; }
    }
}
